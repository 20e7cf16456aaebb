// The stream between the gVisor adapter (host) and airlock-gvisor-shim (in
// the sandbox), over the per-sandbox UNIX socket that runsc's
// --host-uds=open lets the shim connect to.
//
// shim -> host: fixed 16-byte records {u32 type, u32 zero, i64 value},
// little-endian (host and sandbox share the CPU). The host treats them as
// untrusted bytes: decodeShimRecords never throws and refuses unknown types
// and non-zero padding, after which the host stops reading the stream.
// host -> shim: per command, one request (u32 length, then NUL-separated
// fields: process limit, working directory, argc, argv..., envc, env...)
// carrying the command's stdin, stdout and stderr as SCM_RIGHTS; then
// exactly one byte, kStopByte: "end the command now" (kill every process of
// the command and report kDone), sent at the end whether or not kDone came
// first.
//
// A command's life on the stream: kStarted(pid inside the sandbox) or
// kStartFailed(errno of fork); then kMainExited(wait status) when the main
// process exits; kPidsLimit(process count) whenever the shim sees the
// command at its process limit; finally kDone(cpu microseconds of the
// command's reaped processes) after every process of the command is gone.
// kKilling(0), at most once per command, after the stop byte: the shim has
// sent SIGKILL to every process of the command (the host's memory limit
// waits for it before it gives a command stalled at its limit the room to
// die in; gvisor_memory.h).
//
// The side-process channel (code mode: ExecutionEnvironment::startSideProcess,
// execution_environment.h; the shim's side in gvisor_shim.cpp): a second
// connection, to the host's socket kSideSocketName in the control directory,
// which the shim makes just before the command channel's. host -> shim only:
// per side process one request in the command request's format, optionally
// followed by two more fields, the rows and columns of a pseudo-terminal
// (decimal, 1..65535 each; SideCommand::terminal): without them the process
// gets pipes, as before terminals existed. The request carries as SCM_RIGHTS
// stdout's and stderr's write ends, the status pipe's write end, the kill
// pipe's read end and, only when the process gets a stdin, stdin's read end
// (kSideFdsMin or kSideFdsMax fds; without one its stdin is the sandbox's
// /dev/null; a terminal request always has one). Nothing comes back on the
// channel: the process's keeper answers on its status pipe with the records
// above, kStarted(pid inside the sandbox) or kStartFailed(errno of what
// failed: the fork, or opening the terminal), then kMainExited(wait status);
// end-of-file on the status pipe before kMainExited means the keeper was
// killed (the host counts it SIGKILL). The kill pipe's end-of-file (the host
// closed its end, or the host is gone) means "SIGKILL the process's group"
// (with a terminal: every process of the terminal's session, since job
// control gives a shell's jobs groups of their own). For a process without a
// terminal it carries no bytes; for one with a terminal it carries resize
// records from the host, kResizeRecordBytes each ({u16 rows, u16 columns},
// little-endian), which the keeper applies to the terminal in order.
//
// With a terminal the keeper holds the terminal's master inside the sandbox
// (the host cannot: it lives in the sentry) and relays: what the host writes
// on stdin is typed into the terminal, and stdin's end-of-file types the
// terminal's end-of-file character once; everything the process writes to
// the terminal arrives on the stdout pipe; the stderr pipe reaches
// end-of-file at once. The stdout pipe ends once the process has exited, no
// process of its session is left and what the terminal held is relayed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace airlock::oci {

enum class ShimRecordType : std::uint32_t {
  kStarted = 1,
  kStartFailed = 2,
  kMainExited = 3,
  kPidsLimit = 4,
  kDone = 5,
  kKilling = 6,
};

struct ShimRecord {
  ShimRecordType type;
  std::int64_t value = 0;
  bool operator==(const ShimRecord&) const = default;
};

inline constexpr std::size_t kShimRecordBytes = 16;
inline constexpr int kSideFdsMin = 4;  // stdout, stderr, status, kill
inline constexpr int kSideFdsMax = 5;  // and stdin
inline constexpr char kStopByte = 'S';
inline constexpr std::size_t kResizeRecordBytes = 4;

// A pseudo-terminal's size on the kill pipe (host -> keeper).
struct TerminalResize {
  std::uint16_t rows = 0;
  std::uint16_t columns = 0;
  bool operator==(const TerminalResize&) const = default;
};
void encodeTerminalResize(const TerminalResize& size, char out[kResizeRecordBytes]) noexcept;
TerminalResize decodeTerminalResize(const char in[kResizeRecordBytes]) noexcept;

// Encodes one record (exactly kShimRecordBytes bytes).
void encodeShimRecord(const ShimRecord& record, char out[kShimRecordBytes]) noexcept;

struct ShimDecode {
  std::vector<ShimRecord> records;  // complete, valid records in order
  std::size_t consumed = 0;         // bytes of `input` they used
  bool malformed = false;           // a record with an unknown type or padding
};
// Decodes as many whole records as `input` holds; stops at the first
// malformed one (consumed then points at it) or at a partial tail.
ShimDecode decodeShimRecords(std::string_view input) noexcept;

}  // namespace airlock::oci
