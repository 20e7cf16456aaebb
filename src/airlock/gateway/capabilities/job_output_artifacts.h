// The gateway's JobOutputSink (capability/broker/job_output_sink.h): each
// terminal job stream an artifact (spec 000 "ArtifactWriter"; spec 001
// "cap/job", `Job.spill`), so the execution side's jobs store their output
// without linking the store.
#pragma once

#include <memory>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/job_output_sink.h"

namespace airlock::gateway {

// A sink that creates each stream through `writer` with the stream's
// filename and media type and trust EXTERNAL_UNTRUSTED (sandbox bytes;
// tenant, run and origin are the writer's scope), and answers the
// artifact's id and stored media type. Errors: those of
// ArtifactWriter::create. Safe from several threads at once when the
// writer's store is (every store here is). The sink shares `writer`; the
// store it writes to must outlive the sink. A null writer: a null sink
// (no spill).
std::shared_ptr<capability::JobOutputSink> artifactJobOutputSink(
    std::shared_ptr<artifacts::ArtifactWriter> writer);

}  // namespace airlock::gateway
