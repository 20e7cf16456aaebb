// airlock-node: `airlock serve --role execution`, in an executable of its
// own that links no database client (cli/serve_execution.h).
#include "airlock/cli/serve_execution.h"

int main(int argc, char** argv) {
  return airlock::cli::executionNodeMain(argc, argv);
}
