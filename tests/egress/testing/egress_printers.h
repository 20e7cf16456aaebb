// gtest printers so failures show reason and class names, not bytes.
#pragma once

#include <ostream>

#include "airlock/egress/address.h"
#include "airlock/egress/reason.h"

namespace airlock::egress {

inline void PrintTo(Reason r, std::ostream* os) {
  *os << reasonName(r);
}
inline void PrintTo(AddressClass c, std::ostream* os) {
  *os << addressClassName(c);
}

}  // namespace airlock::egress
