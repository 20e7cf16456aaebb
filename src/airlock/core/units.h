// Sizes and durations with units, for the CLI and configuration.
//
// Sizes: a non-negative integer followed by an optional unit: B, K/KB/KiB,
// M/MB/MiB, G/GB/GiB, T/TB/TiB (all binary: K = 1024; case-insensitive).
// A bare number is bytes; spaces around the text and between number and unit
// are allowed ("512 MiB" parses). Durations: an integer followed by ms, s, m or h;
// a bare number is seconds. Overflow, negatives, fractions and unknown units
// are ToolValidationError naming the text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock {

Result<std::int64_t> parseSize(std::string_view text);
Result<std::chrono::milliseconds> parseDuration(std::string_view text);
// CPU count like "1", "0.5", "2.25" -> millicores (1000 per CPU); at most
// three decimal places (more only if zeros). "500m" is taken as millicores.
Result<std::int64_t> parseCpus(std::string_view text);

// "512 MiB": the largest of TiB, GiB, MiB, KiB that divides exactly, else
// bytes (1536 -> "1536 B", not "1.5 KiB"). Exact, so
// parseSize(formatSize(n)) == n for every n >= 0. Negative input gives "-n B".
std::string formatSize(std::int64_t bytes);

}  // namespace airlock
