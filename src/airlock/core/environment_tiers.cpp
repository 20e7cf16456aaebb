#include "airlock/core/environment_tiers.h"

#include <set>

#include "airlock/core/encoding.h"

namespace airlock {
namespace {

// Exact names, then patterns. A leading or trailing '*' marks a pattern.
constexpr std::string_view kTier0[] = {
    // Platform: database, cache, the service's own credentials.
    "DATABASE_URL", "PGPASSWORD", "PGPASSFILE", "PGUSER", "PGHOST", "PGSERVICEFILE", "REDIS_URL",
    "MONGODB_URI", "AIRLOCK_API_TOKEN", "AIRLOCK_SERVICE_TOKEN",
    // Cloud instance and object-store credentials.
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_FEDERATED_TOKEN_FILE", "AZURE_STORAGE_CONNECTION_STRING",
    // Model providers and code hosts.
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY",
    "COHERE_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
    "GITLAB_TOKEN", "NPM_TOKEN",
    // Host access: agents, cluster and container control, loader injection.
    "SSH_AUTH_SOCK", "KUBECONFIG", "DOCKER_HOST", "DOCKER_CONFIG", "LD_PRELOAD", "LD_LIBRARY_PATH",
    "LD_AUDIT",
    // Patterns.
    "AIRLOCK_*", "*_API_KEY", "*_APIKEY", "*_SECRET", "*_SECRET_KEY", "*_SECRET_ACCESS_KEY",
    "*_TOKEN", "*_PASSWORD", "*_PASSWD", "*_CREDENTIALS", "*_PRIVATE_KEY", "*_ACCESS_KEY",
    "*_CONNECTION_STRING", "*_DSN"};

constexpr std::string_view kTier2[] = {
    "HOME", "PWD", "PATH", "TMPDIR", "LANG", kBridgeSocketVariable, kBridgeTokenVariable,
    // Set by the adapter only when the sandbox has egress (port/egress_route.h);
    // never copied from the host, whose proxy URL may carry credentials.
    "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"};

char upper(char c) noexcept {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (upper(a[i]) != upper(b[i])) return false;
  }
  return true;
}

bool matchesTier0Entry(std::string_view name, std::string_view entry) noexcept {
  if (entry.starts_with('*')) {
    const auto suffix = entry.substr(1);
    return name.size() >= suffix.size() &&
           equalsIgnoreCase(name.substr(name.size() - suffix.size()), suffix);
  }
  if (entry.ends_with('*')) {
    const auto prefix = entry.substr(0, entry.size() - 1);
    return name.size() >= prefix.size() && equalsIgnoreCase(name.substr(0, prefix.size()), prefix);
  }
  return equalsIgnoreCase(name, entry);
}

}  // namespace

std::span<const std::string_view> tier0Names() noexcept {
  return kTier0;
}

bool isTier0Name(std::string_view name) noexcept {
  for (const auto entry : kTier0) {
    if (matchesTier0Entry(name, entry)) return true;
  }
  return false;
}

std::span<const std::string_view> tier2Names() noexcept {
  return kTier2;
}

// Case-insensitive: "https_proxy" is as reserved as "HTTPS_PROXY" (tools
// read both spellings).
bool isTier2Name(std::string_view name) noexcept {
  for (const auto entry : kTier2) {
    if (equalsIgnoreCase(entry, name)) return true;
  }
  return false;
}

bool isValidEnvName(std::string_view name) noexcept {
  if (name.empty()) return false;
  const auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  if (!alpha(name[0]) && name[0] != '_') return false;
  for (const char c : name) {
    if (!alpha(c) && c != '_' && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

Result<void> checkAddedVariable(std::string_view what, std::string_view name,
                                std::string_view value) {
  const std::string where = std::string(what) + " variable " + quoteForMessage(name);
  if (!isValidEnvName(name))
    return fail(ErrorCode::kToolValidationError,
                where +
                    " is not a valid variable name (letters, digits and '_', not starting "
                    "with a digit)");
  if (isTier0Name(name))
    return fail(ErrorCode::kToolValidationError,
                where + " names a credential; credentials never enter a sandbox (tier 0)");
  if (isTier2Name(name))
    return fail(ErrorCode::kToolValidationError,
                where +
                    " is set by Airlock itself inside every sandbox (tier 2) and cannot be "
                    "replaced");
  if (value.find('\0') != std::string_view::npos)
    return fail(ErrorCode::kToolValidationError, where + " has a NUL byte in its value");
  return {};
}

Result<std::vector<std::string>> validateTier1Names(std::span<const std::string> names) {
  std::set<std::string_view> seen;
  std::vector<std::string> out;
  out.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    const std::string where =
        "environment name #" + std::to_string(i + 1) + " " + quoteForMessage(name);
    if (!isValidEnvName(name)) {
      return fail(ErrorCode::kConfigurationError,
                  where +
                      " is not a valid variable name (letters, digits and '_', not "
                      "starting with a digit)");
    }
    if (isTier0Name(name)) {
      return fail(ErrorCode::kConfigurationError,
                  where +
                      " names a credential; credentials never reach a sandbox (tier 0), so it "
                      "cannot be passed through");
    }
    if (isTier2Name(name)) {
      return fail(ErrorCode::kConfigurationError,
                  where +
                      " is set by Airlock itself inside every sandbox (tier 2) and cannot "
                      "be passed through");
    }
    if (!seen.insert(name).second) {
      return fail(ErrorCode::kConfigurationError, where + " is listed twice");
    }
    out.push_back(name);
  }
  return out;
}

BuiltEnvironment buildEnvironment(
    const Result<std::vector<std::string>>& tier1_names,
    const std::function<std::optional<std::string>(std::string_view)>& host_lookup,
    std::string_view working_directory, const std::optional<BridgeEndpoint>& bridge) {
  BuiltEnvironment built;

  // Tier 1, only from a list that validates now; anything else is tier 2
  // alone (fail-closed), never the host environment.
  if (!tier1_names) {
    built.tier1_error = tier1_names.error();
  } else if (auto checked = validateTier1Names(*tier1_names); !checked) {
    built.tier1_error = checked.error();
  } else if (host_lookup) {
    for (const auto& name : *checked) {
      auto value = host_lookup(name);
      if (!value || value->find('\0') != std::string::npos) continue;
      built.variables.emplace(name, std::move(*value));
    }
  }

  // Tier 2, assigned last so that it always wins.
  std::string pwd(kWorkspaceRoot);
  if (!working_directory.empty() && working_directory != ".") {
    pwd += '/';
    pwd += working_directory;
  }
  built.variables["HOME"] = std::string(kWorkspaceRoot);
  built.variables["PWD"] = std::move(pwd);
  built.variables["PATH"] = std::string(kImagePath);
  built.variables["TMPDIR"] = "/tmp";
  built.variables["LANG"] = "C.UTF-8";
  if (bridge) {
    built.variables[std::string(kBridgeSocketVariable)] = bridge->socket_path;
    built.variables[std::string(kBridgeTokenVariable)] = bridge->token;
  }
  return built;
}

void addImageEnvironment(std::map<std::string, std::string>& variables,
                         std::span<const std::string> image_env) {
  for (const auto& entry : image_env) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || entry.find('\0') != std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (!isValidEnvName(name) || isTier0Name(name)) continue;
    if (name == "PATH") {
      variables[name] = entry.substr(eq + 1);
      continue;
    }
    if (isTier2Name(name)) continue;
    variables.emplace(name, entry.substr(eq + 1));
  }
}

}  // namespace airlock
