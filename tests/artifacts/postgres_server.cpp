#include "postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "test_tree.h"

namespace airlock::artifacts::testing {
namespace {

std::string binDir() {
  const char* env = std::getenv("AIRLOCK_PG_BINDIR");
  return env && *env ? env : "/usr/lib/postgresql/15/bin";
}

struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

RunAs runAs() {
  if (::geteuid() != 0) return {};
  if (const passwd* pw = ::getpwnam("postgres")) return {true, pw->pw_uid, pw->pw_gid};
  return {true, 65534, 65534};
}

// fork + (drop privileges, die with the parent) + exec; output to `log`.
// Returns the child's pid or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log,
            const RunAs& as) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child: only syscalls from here on.
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) ::_exit(126);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  if (as.drop) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0)
      ::_exit(126);
  }
  // The test's own directory may not be readable by the server's user.
  if (::chdir(cwd.c_str()) != 0) ::_exit(126);
  ::prctl(PR_SET_PDEATHSIG, SIGINT);  // set after setuid, which would clear it
  if (::getppid() != parent) ::_exit(126);
  ::execv(args[0], args.data());
  ::_exit(127);
}

int waitExit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Result<void> PostgresServer::start() {
  const std::string bin = binDir();
  if (::access((bin + "/initdb").c_str(), X_OK) != 0 ||
      ::access((bin + "/postgres").c_str(), X_OK) != 0)
    return fail(ErrorCode::kConfigurationError,
                "PostgreSQL 15 binaries not found in " + bin +
                    " (run scripts/bootstrap, or set AIRLOCK_PG_BINDIR)");
  char tmpl[] = "/tmp/airlock-pg-XXXXXX";
  if (!::mkdtemp(tmpl)) return failErrno(ErrorCode::kExecutionUnavailable, "mkdtemp", errno);
  dir_ = tmpl;
  const RunAs as = runAs();
  if (as.drop && ::chown(dir_.c_str(), as.uid, as.gid) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "chown " + dir_, errno);

  const std::string log = dir_ + "/server.log";
  {
    // Created by us so both the server user and we can write it.
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (as.drop) (void)::fchown(fd, as.uid, as.gid);
      ::close(fd);
    }
  }
  const pid_t initdb = spawn({bin + "/initdb", "-D", dir_ + "/data", "-U", "airlock", "-A", "trust",
                              "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"},
                             dir_, log, as);
  if (initdb < 0 || waitExit(initdb) != 0)
    return fail(ErrorCode::kExecutionUnavailable, "initdb failed; see " + log);

  pid_ = spawn({bin + "/postgres",
                "-D",
                dir_ + "/data",
                "-k",
                dir_,
                "-p",
                "5432",
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "shared_buffers=16MB",
                "-c",
                "max_connections=40",
                "-c",
                "dynamic_shared_memory_type=mmap",
                "-c",
                "logging_collector=off"},
               dir_, log, as);
  if (pid_ < 0) return failErrno(ErrorCode::kExecutionUnavailable, "fork postgres", errno);

  // Readiness: PQping until the server accepts connections, or it exits.
  const std::string info = conninfo("postgres");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (PQping(info.c_str()) != PQPING_OK) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return fail(ErrorCode::kExecutionUnavailable, "postgres exited at start; see " + log);
    }
    if (std::chrono::steady_clock::now() > deadline)
      return fail(ErrorCode::kExecutionUnavailable, "postgres did not start in 60 s; see " + log);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

void PostgresServer::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGINT);  // fast shutdown
    waitExit(pid_);
    pid_ = -1;
  }
  if (!dir_.empty()) {
    int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      workspace::testing::removeContents(fd);
      ::close(fd);
    }
    ::rmdir(dir_.c_str());
    dir_.clear();
  }
}

std::string PostgresServer::conninfo(const std::string& database) const {
  return "host=" + dir_ + " port=5432 user=airlock dbname=" + database + " connect_timeout=10";
}

Result<void> PostgresServer::createDatabase(const std::string& name) {
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return fail(ErrorCode::kToolValidationError, "database name");
  PGconn* conn = PQconnectdb(conninfo("postgres").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return fail(ErrorCode::kExecutionUnavailable, "connect: " + message);
  }
  // An identifier cannot be a bound parameter; `name` was checked above.
  const std::string sql = "CREATE DATABASE " + name + " TEMPLATE template0";
  PGresult* result = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  std::string message = ok ? "" : PQresultErrorMessage(result);
  PQclear(result);
  PQfinish(conn);
  if (!ok) return fail(ErrorCode::kExecutionUnavailable, "create database: " + message);
  return {};
}

}  // namespace airlock::artifacts::testing
