// msgpack codec for wire Values, over libmsgpuck (docs/wire.md "Values" and
// "Limits"; spec 001 "Wire").
//
// decodeValue is total: for any byte string it returns a Value or a
// ValueFault and never throws (short of std::bad_alloc, which the limits keep
// to a few MiB), asserts, or reads outside `bytes`. It recurses once per
// nesting level and stops at Limits::max_depth, so hostile input cannot
// exhaust the stack; it allocates only after checking a container's declared
// size against both the bytes remaining and Limits::max_values.
//
// The decoder reads front to back and reports the first defect it meets, in
// this order (docs/wire.md "Decoding procedure" states the same order, so
// every implementation gives the same verdict for the same bytes):
//   read one value at depth d (the outermost value is at depth 1):
//     a. no byte left, or a type byte outside the subset (0xc1, ext)
//        -> kMalformed;
//     b. the header (length or count field) is incomplete -> kMalformed;
//     c. str / bin: the body does not fit in the bytes left, or a str is not
//        well-formed UTF-8 -> kMalformed;
//     d. array / map: d > max_depth -> kLimit; then the declared element
//        count (a map: twice its pair count) exceeds the bytes left (each
//        element takes at least one byte) -> kMalformed; then the running
//        total of declared values exceeds max_values -> kLimit. The total
//        starts at 1 for the outermost value and each container adds its
//        declared element count, so map keys count as values;
//     e. then the elements in order, at depth d+1; in a map each key must be
//        a str (else kMalformed, checked at the key's type byte after a.) and
//        must not repeat a key of the same map (kMalformed);
//   after the outermost value, any byte left -> kMalformed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "airlock/capability/wire/value.h"
#include "airlock/core/error.h"

namespace airlock::capability::wire {

struct Limits {
  // Containers nested inside one another, the outermost counting as 1.
  std::size_t max_depth;
  // Values in one encoded value, counting every map key and every container.
  std::size_t max_values;
};

// Version 1's limits for one frame payload.
inline constexpr Limits kWireLimits{64, 262144};

enum class ValueProblem {
  // Not one well-formed value of the wire's msgpack subset.
  kMalformed,
  // Well-formed as far as read, but deeper or larger than Limits allow.
  kLimit,
};

struct ValueFault {
  ValueProblem problem;
  // What and where, e.g. "string at byte 17 is not UTF-8". For logs only;
  // never part of a conformance verdict.
  std::string detail;
};

// Decodes exactly one value that occupies all of `bytes`.
tl::expected<Value, ValueFault> decodeValue(std::string_view bytes,
                                            const Limits& limits = kWireLimits);

// Appends the canonical encoding of `value` to `out`: the shortest msgpack
// form of every integer, string, bin, array and map header, float as float64,
// map entries in their stored order. Fails with kToolValidationError (and
// leaves `out` with an unspecified tail appended) when the value breaks a
// rule the decoder enforces: a string that is not UTF-8, a repeated map key,
// nesting or size beyond `limits`, or a length beyond 2^32-1.
Result<void> encodeValue(const Value& value, std::string& out, const Limits& limits = kWireLimits);

// encodeValue for a value nested inside an enclosing value that the caller
// writes by hand (the frame encoder's envelope): `depth` is this value's own
// depth and `declared` the enclosing value's running total of declared values
// (see the decoding procedure), updated by what this value declares.
Result<void> encodeNestedValue(const Value& value, std::string& out, const Limits& limits,
                               std::size_t depth, std::size_t& declared);

}  // namespace airlock::capability::wire
