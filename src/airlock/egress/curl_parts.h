// Internal to the egress HTTP code (http_client.cpp, outbound_guard.cpp):
// owners of libcurl's handles and the reads of a parsed URL both use. Link
// CURL::libcurl to include it. Inline, so it needs no library of its own.
#pragma once

#include <curl/curl.h>

#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::egress::curl_parts {

// A unique_ptr deleter calling libcurl's cleanup function `Free`.
template <auto Free>
struct CurlFree {
  template <class T>
  void operator()(T* p) const noexcept {
    Free(p);
  }
};
using CurlEasy = std::unique_ptr<CURL, CurlFree<curl_easy_cleanup>>;
using CurlMulti = std::unique_ptr<CURLM, CurlFree<curl_multi_cleanup>>;
using CurlList = std::unique_ptr<curl_slist, CurlFree<curl_slist_free_all>>;
using CurlUrl = std::unique_ptr<CURLU, CurlFree<curl_url_cleanup>>;

// A string curl allocated, as a std::string ("" for null); frees it.
inline std::string takeCurlString(char* s) {
  std::string out = s != nullptr ? s : "";
  curl_free(s);
  return out;
}

// One part of a parsed URL (curl_url_get with `flags`); nullopt when the
// URL has no such part or curl refuses it.
inline std::optional<std::string> urlPart(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* out = nullptr;
  if (curl_url_get(u, part, &out, flags) != CURLUE_OK) {
    curl_free(out);
    return std::nullopt;
  }
  return takeCurlString(out);
}

// ASCII lower case (schemes, hosts, header names).
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace airlock::egress::curl_parts
