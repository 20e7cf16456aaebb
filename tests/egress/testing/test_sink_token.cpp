// The only definition of makeTestSinkToken (see classifier.h). Linked only
// into test binaries through airlock_egress_testing.
#include "airlock/egress/classifier.h"

namespace airlock::egress::testing {

TestSinkToken makeTestSinkToken() {
  return TestSinkToken();
}

}  // namespace airlock::egress::testing
