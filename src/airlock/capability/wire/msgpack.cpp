#include "airlock/capability/wire/msgpack.h"

#include <msgpuck.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "airlock/core/encoding.h"

namespace airlock::capability::wire {
namespace {

// msgpuck's mp_check() is not used: its element counter is an int, so a map32
// header claiming 2^31 pairs wraps it and the header passes as empty. Each
// value is checked here instead, with msgpuck's per-type header checks.
class Reader {
 public:
  Reader(std::string_view bytes, const Limits& limits)
      : begin_(bytes.data()),
        cur_(bytes.data()),
        end_(bytes.data() + bytes.size()),
        limits_(limits) {}

  tl::expected<Value, ValueFault> readAll() {
    auto v = read(1);
    if (!v) return v;
    if (cur_ != end_) return malformed("trailing bytes after the value");
    return v;
  }

 private:
  using Out = tl::expected<Value, ValueFault>;

  std::size_t left() const { return static_cast<std::size_t>(end_ - cur_); }
  std::size_t offset() const { return static_cast<std::size_t>(cur_ - begin_); }

  tl::unexpected<ValueFault> malformed(const std::string& what) const {
    return tl::unexpected(
        ValueFault{ValueProblem::kMalformed, what + " at byte " + std::to_string(offset())});
  }
  tl::unexpected<ValueFault> limit(const std::string& what) const {
    return tl::unexpected(
        ValueFault{ValueProblem::kLimit, what + " at byte " + std::to_string(offset())});
  }

  // True when the header at cur_ is incomplete (msgpuck's mp_check_* answer
  // how many bytes are still missing).
  static bool missing(std::ptrdiff_t shortfall) { return shortfall > 0; }

  Out read(std::size_t depth) {
    if (cur_ >= end_) return malformed("value missing");
    const auto type = mp_typeof(*cur_);
    switch (type) {
      case MP_NIL:
        mp_decode_nil(&cur_);
        return Value::nil();
      case MP_BOOL:
        return Value::boolean(mp_decode_bool(&cur_));
      case MP_UINT:
        if (missing(mp_check_uint(cur_, end_))) return malformed("truncated integer");
        return Value::unsignedInteger(mp_decode_uint(&cur_));
      case MP_INT:
        if (missing(mp_check_int(cur_, end_))) return malformed("truncated integer");
        return Value::integer(mp_decode_int(&cur_));
      case MP_FLOAT:
        if (missing(mp_check_float(cur_, end_))) return malformed("truncated float");
        return Value::floating(static_cast<double>(mp_decode_float(&cur_)));
      case MP_DOUBLE:
        if (missing(mp_check_double(cur_, end_))) return malformed("truncated float");
        return Value::floating(mp_decode_double(&cur_));
      case MP_STR: {
        auto body = readBody(mp_check_strl(cur_, end_), &mp_decode_strl, "string");
        if (!body) return tl::unexpected(std::move(body.error()));
        if (!isValidUtf8(*body)) return malformed("string is not UTF-8");
        return Value::string(std::string(*body));
      }
      case MP_BIN: {
        auto body = readBody(mp_check_binl(cur_, end_), &mp_decode_binl, "bytes");
        if (!body) return tl::unexpected(std::move(body.error()));
        return Value::bytes(std::string(*body));
      }
      case MP_ARRAY:
        return readArray(depth);
      case MP_MAP:
        return readMap(depth);
      case MP_EXT:
        break;
    }
    return malformed("type byte outside the wire's msgpack subset");
  }

  // str / bin: header, then a body that must fit in what is left. The
  // returned view points into the input.
  tl::expected<std::string_view, ValueFault> readBody(std::ptrdiff_t header_shortfall,
                                                      std::uint32_t (*decode_len)(const char**),
                                                      const char* what) {
    if (missing(header_shortfall)) return malformed(std::string("truncated ") + what + " header");
    const std::uint32_t len = decode_len(&cur_);
    if (len > left()) return malformed(std::string(what) + " runs past the end");
    std::string_view body(cur_, len);
    cur_ += len;
    return body;
  }

  // Depth, then room for the declared elements, then the value budget.
  tl::expected<void, ValueFault> admitContainer(std::size_t depth, std::uint64_t elements) {
    if (depth > limits_.max_depth) return limit("nesting deeper than the limit");
    if (elements > left()) return malformed("container declares more elements than bytes left");
    if (declared_ > limits_.max_values || elements > limits_.max_values - declared_) {
      return limit("more values than the limit");
    }
    declared_ += static_cast<std::size_t>(elements);
    return {};
  }

  Out readArray(std::size_t depth) {
    if (missing(mp_check_array(cur_, end_))) return malformed("truncated array header");
    const std::uint32_t n = mp_decode_array(&cur_);
    if (auto ok = admitContainer(depth, n); !ok) return tl::unexpected(std::move(ok.error()));
    Array items;
    items.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      auto item = read(depth + 1);
      if (!item) return item;
      items.push_back(std::move(*item));
    }
    return Value::array(std::move(items));
  }

  Out readMap(std::size_t depth) {
    if (missing(mp_check_map(cur_, end_))) return malformed("truncated map header");
    const std::uint32_t n = mp_decode_map(&cur_);
    if (auto ok = admitContainer(depth, 2 * static_cast<std::uint64_t>(n)); !ok) {
      return tl::unexpected(std::move(ok.error()));
    }
    Map entries;
    entries.reserve(n);
    // Small maps are checked for repeated keys linearly; larger ones by set.
    constexpr std::uint32_t kLinear = 16;
    std::unordered_set<std::string_view> seen;
    if (n > kLinear) seen.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (cur_ >= end_) return malformed("map key missing");
      if (mp_typeof(*cur_) != MP_STR) {
        if (mp_typeof(*cur_) == MP_EXT)
          return malformed("type byte outside the wire's msgpack subset");
        return malformed("map key is not a string");
      }
      const char* key_at = cur_;
      auto key = readBody(mp_check_strl(cur_, end_), &mp_decode_strl, "string");
      if (!key) return tl::unexpected(std::move(key.error()));
      if (!isValidUtf8(*key)) return malformed("string is not UTF-8");
      bool repeated;
      if (n > kLinear) {
        repeated = !seen.insert(*key).second;
      } else {
        repeated = std::any_of(entries.begin(), entries.end(),
                               [&](const auto& e) { return e.first == *key; });
      }
      if (repeated) {
        cur_ = key_at;
        return malformed("repeated map key");
      }
      auto value = read(depth + 1);
      if (!value) return value;
      entries.emplace_back(std::string(*key), std::move(*value));
    }
    return Value::map(std::move(entries));
  }

  const char* begin_;
  const char* cur_;
  const char* end_;
  Limits limits_;
  std::size_t declared_ = 1;  // the outermost value
};

class Writer {
 public:
  Writer(std::string& out, const Limits& limits, std::size_t& declared)
      : out_(out), limits_(limits), declared_(declared) {}

  Result<void> write(const Value& v, std::size_t depth) {
    char buf[16];
    switch (v.type()) {
      case Value::Type::kNil:
        put(buf, mp_encode_nil(buf));
        return {};
      case Value::Type::kBool:
        put(buf, mp_encode_bool(buf, *v.asBool()));
        return {};
      case Value::Type::kInteger:
        if (auto u = v.asUnsigned()) {
          put(buf, mp_encode_uint(buf, *u));
        } else {
          put(buf, mp_encode_int(buf, *v.asSigned()));
        }
        return {};
      case Value::Type::kFloat:
        put(buf, mp_encode_double(buf, *v.asFloat()));
        return {};
      case Value::Type::kString:
        return writeString(*v.asString());
      case Value::Type::kBytes: {
        const std::string& b = *v.asBytes();
        if (b.size() > std::numeric_limits<std::uint32_t>::max()) return tooLong("bytes");
        put(buf, mp_encode_binl(buf, static_cast<std::uint32_t>(b.size())));
        out_ += b;
        return {};
      }
      case Value::Type::kArray: {
        const Array& a = *v.asArray();
        if (auto ok = admit(depth, a.size()); !ok) return ok;
        put(buf, mp_encode_array(buf, static_cast<std::uint32_t>(a.size())));
        for (const Value& item : a) {
          if (auto ok = write(item, depth + 1); !ok) return ok;
        }
        return {};
      }
      case Value::Type::kMap: {
        const Map& m = *v.asMap();
        if (m.size() > std::numeric_limits<std::uint32_t>::max()) return tooLong("map");
        if (auto ok = admit(depth, 2 * m.size()); !ok) return ok;
        std::unordered_set<std::string_view> seen;
        seen.reserve(m.size());
        put(buf, mp_encode_map(buf, static_cast<std::uint32_t>(m.size())));
        for (const auto& [key, value] : m) {
          if (!seen.insert(key).second) {
            return fail(ErrorCode::kToolValidationError,
                        "map key " + quoteForMessage(key) + " repeats");
          }
          if (auto ok = writeString(key); !ok) return ok;
          if (auto ok = write(value, depth + 1); !ok) return ok;
        }
        return {};
      }
    }
    return {};
  }

 private:
  void put(const char* begin, const char* end) { out_.append(begin, end); }

  static tl::unexpected<Error> tooLong(const char* what) {
    return fail(ErrorCode::kToolValidationError,
                std::string(what) + " longer than msgpack's 2^32-1 limit");
  }

  Result<void> writeString(const std::string& s) {
    if (s.size() > std::numeric_limits<std::uint32_t>::max()) return tooLong("string");
    if (!isValidUtf8(s)) {
      return fail(ErrorCode::kToolValidationError,
                  "string " + quoteForMessage(s) + " is not UTF-8 (send it as bytes)");
    }
    char buf[8];
    put(buf, mp_encode_strl(buf, static_cast<std::uint32_t>(s.size())));
    out_ += s;
    return {};
  }

  Result<void> admit(std::size_t depth, std::size_t elements) {
    if (depth > limits_.max_depth) {
      return fail(ErrorCode::kToolValidationError,
                  "value nests deeper than " + std::to_string(limits_.max_depth) + " containers");
    }
    if (elements > std::numeric_limits<std::uint32_t>::max() || declared_ > limits_.max_values ||
        elements > limits_.max_values - declared_) {
      return fail(ErrorCode::kToolValidationError,
                  "value holds more than " + std::to_string(limits_.max_values) + " values");
    }
    declared_ += elements;
    return {};
  }

  std::string& out_;
  Limits limits_;
  std::size_t& declared_;
};

}  // namespace

tl::expected<Value, ValueFault> decodeValue(std::string_view bytes, const Limits& limits) {
  return Reader(bytes, limits).readAll();
}

Result<void> encodeValue(const Value& value, std::string& out, const Limits& limits) {
  std::size_t declared = 1;
  return Writer(out, limits, declared).write(value, 1);
}

Result<void> encodeNestedValue(const Value& value, std::string& out, const Limits& limits,
                               std::size_t depth, std::size_t& declared) {
  return Writer(out, limits, declared).write(value, depth);
}

}  // namespace airlock::capability::wire
