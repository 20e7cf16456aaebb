// checkTerminalSize (port/execution_environment.h, TerminalSize).
#include <string>

#include "airlock/port/execution_environment.h"

namespace airlock {

namespace {
Result<void> checkCells(const char* field, std::uint16_t value) {
  if (value >= 1 && value <= kMaxTerminalCells) return {};
  return fail(ErrorCode::kToolValidationError, std::string("terminal ") + field + " must be 1 to " +
                                                   std::to_string(kMaxTerminalCells) + ", not " +
                                                   std::to_string(value));
}
}  // namespace

Result<void> checkTerminalSize(const TerminalSize& size) {
  if (auto r = checkCells("rows", size.rows); !r) return r;
  return checkCells("columns", size.columns);
}

}  // namespace airlock
