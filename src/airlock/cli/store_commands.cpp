// The commands on the local stores: `airlock image pull|import|ls|rm`
// (cli/image_command.h) and `airlock artifact list|get|rm`
// (cli/artifact_command.h), as command objects (cli/command.h).
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <optional>
#include <string>

#include "airlock/cli/artifact_command.h"
#include "airlock/cli/command.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/summary.h"

namespace airlock::cli {
namespace {

// --state-dir DIR on each of a command's subcommands, into one target.
void addStateDir(std::initializer_list<CLI::App*> subcommands, std::string& target,
                 const std::string& help) {
  for (CLI::App* sub : subcommands) sub->add_option("--state-dir", target, help)->type_name("DIR");
}

class ImageCommand final : public Command {
 public:
  std::string_view name() const override { return "image"; }
  std::string_view summary() const override {
    return "Pull, import, list or remove the images airlock run --image uses.";
  }
  void defineUsage(CLI::App& app) override;
  int execute(const CLI::App& app) override {
    if (app.got_subcommand("pull")) return runImagePull(state_dir_, name_, json_);
    if (app.got_subcommand("import")) return runImageImport(state_dir_, name_, ref_name_, json_);
    if (app.got_subcommand("ls")) return runImageList(state_dir_, json_);
    return runImageRemove(state_dir_, name_);
  }

 private:
  std::string state_dir_ = kDefaultStateDir;
  std::string name_;
  std::string ref_name_;
  bool json_ = false;
};

void ImageCommand::defineUsage(CLI::App& app) {
  app.require_subcommand(1);
  CLI::App* pull = app.add_subcommand(
      "pull", "Resolve a reference at its registry to a digest and store that image.");
  pull->add_option("reference", name_, "REGISTRY/NAME:TAG or REGISTRY/NAME@DIGEST")
      ->required()
      ->type_name("REF");
  CLI::App* import = app.add_subcommand(
      "import",
      "Store the image of an OCI image layout directory, or an OCI or docker save archive.");
  import->add_option("path", name_, "The layout directory or the archive")
      ->required()
      ->type_name("PATH");
  import
      ->add_option("--ref", ref_name_,
                   "Of a layout holding several images, the one its index names so (its tag)")
      ->type_name("NAME");
  CLI::App* ls = app.add_subcommand("ls", "One line per stored image: digest, size, references.");
  CLI::App* rm = app.add_subcommand(
      "rm", "Drop a reference, or an image by digest, and collect what nothing uses.");
  rm->add_option("name", name_, "A reference or a digest")->required()->type_name("NAME");
  addStateDir({pull, import, ls, rm}, state_dir_,
              "Where the image store lives, under images/ (default /run/airlock)");
  for (CLI::App* sub : {pull, import, ls}) sub->add_flag("--json", json_, "Print JSON");
}

class ArtifactCommand final : public Command {
 public:
  std::string_view name() const override { return "artifact"; }
  std::string_view summary() const override {
    return "List, fetch or delete the artifacts kept by airlock run --export.";
  }
  void defineUsage(CLI::App& app) override;
  int execute(const CLI::App& app) override {
    if (state_dir_.empty()) return printErrorLine("--state-dir: the directory is empty");
    if (app.got_subcommand("list")) return runArtifactList(state_dir_, json_);
    if (app.got_subcommand("get")) return runArtifactGet(state_dir_, id_, output_);
    return runArtifactRm(state_dir_, id_);
  }

 private:
  std::string state_dir_ = kDefaultStateDir;
  std::string id_;
  std::optional<std::string> output_;
  bool json_ = false;
};

void ArtifactCommand::defineUsage(CLI::App& app) {
  const std::string state_dir_help = "Where the artifact store lives (default /run/airlock)";
  app.require_subcommand(1);
  app.add_option("--state-dir", state_dir_, state_dir_help)->type_name("DIR");
  CLI::App* list =
      app.add_subcommand("list", "One line per artifact: id, size, created, filename.");
  list->add_flag("--json", json_, "Print a JSON array of the artifacts' metadata");
  CLI::App* get = app.add_subcommand("get",
                                     "Write an artifact's bytes to FILE, or to its original "
                                     "filename (made safe) here; never overwrites.");
  get->add_option("id", id_, "The artifact id")->required()->type_name("ID");
  get->add_option_function<std::string>(
         "-o,--output", [this](const std::string& value) { output_ = value; },
         "The file to create; - writes the bytes to stdout")
      ->type_name("FILE");
  CLI::App* rm = app.add_subcommand("rm", "Delete an artifact and its metadata.");
  rm->add_option("id", id_, "The artifact id")->required()->type_name("ID");
  addStateDir({list, get, rm}, state_dir_, state_dir_help);
}

}  // namespace

std::unique_ptr<Command> makeImageCommand() {
  return std::make_unique<ImageCommand>();
}

std::unique_ptr<Command> makeArtifactCommand() {
  return std::make_unique<ArtifactCommand>();
}

}  // namespace airlock::cli
