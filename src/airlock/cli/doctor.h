// `airlock doctor`: what this machine offers the linux mechanism, and for
// each missing facility one line saying what will not work; then whether
// the gvisor mechanism can run here (runsc installed, and a probe sandbox
// runs `true`). Exit status 0 when the linux mechanism can run here, 1
// otherwise (the gvisor section does not change it).
#pragma once

#include <string>

#include "airlock/sandbox/linux/kernel_features.h"

namespace airlock::cli {

// The report for the given features (pure; tests feed it made-up ones).
std::string formatDoctorReport(const linux_jail::KernelFeatures& features);

// Probes this machine, prints the report on stdout, returns the exit status.
int runDoctor();

}  // namespace airlock::cli
