//===- CommandLine.cpp - cleave-compile's flags over CompileOptions -------===//

#include "CommandLine.h"

#include "llvm/Support/raw_ostream.h"

#include <deque>

namespace cl = llvm::cl;

namespace cleave {
namespace {
/// Makes one llvm::cl option per table entry, storing into the field.
struct Binder : ScalarCompileOptionVisitor<Binder> {
  cl::OptionCategory &general, &training;
  std::vector<std::unique_ptr<cl::Option>> &owned;
  /// The names and help texts the options point to.
  std::deque<std::string> &strings;
  Binder(cl::OptionCategory &general, cl::OptionCategory &training,
         std::vector<std::unique_ptr<cl::Option>> &owned,
         std::deque<std::string> &strings)
      : general(general), training(training), owned(owned), strings(strings) {}

  llvm::StringRef keep(const std::string &text) {
    return strings.emplace_back(text);
  }
  llvm::StringRef name(const CompileOptionInfo &info) {
    return keep(info.name);
  }
  cl::desc help(const CompileOptionInfo &info) {
    return cl::desc(keep(info.help));
  }

  cl::OptionCategory &category(const CompileOptionInfo &info) {
    return info.training ? training : general;
  }
  template <typename Opt>
  void finish(const CompileOptionInfo &info, std::unique_ptr<Opt> option) {
    if (!info.valueName.empty())
      option->setValueStr(keep(info.valueName));
    if (info.hidden)
      option->setHiddenFlag(cl::Hidden);
    owned.push_back(std::move(option));
  }
  template <typename T>
  void bindScalar(const CompileOptionInfo &info, T &field) {
    finish(info, std::make_unique<cl::opt<T, true>>(name(info), help(info),
                                                    cl::location(field),
                                                    cl::cat(category(info))));
  }

  void visit(const CompileOptionInfo &info,
             std::optional<std::string> &field) override {
    // Given or not matters: the value arrives through a callback.
    finish(info, std::make_unique<cl::opt<std::string>>(
                     name(info), help(info), cl::cat(category(info)),
                     cl::callback([&field](const std::string &value) {
                       field = value;
                     })));
  }
  void visit(const CompileOptionInfo &info,
             std::vector<std::string> &field) override {
    finish(info,
           std::make_unique<cl::list<std::string, std::vector<std::string>>>(
               name(info), help(info), cl::location(field),
               cl::cat(category(info))));
  }
  template <typename E>
  void bindEnum(const CompileOptionInfo &info, E &field,
                const std::vector<CompileOptionValue<E>> &values) {
    auto option = std::make_unique<cl::opt<E, true>>(
        name(info), help(info), cl::location(field), cl::cat(category(info)));
    for (const CompileOptionValue<E> &v : values)
      option->getParser().addLiteralOption(v.name, v.value, v.help);
    finish(info, std::move(option));
  }
};
} // namespace

CompileCommandLine::CompileCommandLine()
    : bound(std::make_unique<CompileOptions>()) {
  owned.push_back(std::make_unique<cl::opt<std::string, true>>(
      cl::Positional, cl::desc("<model.onnx | program.mlir>"), cl::Required,
      cl::location(bound->input), cl::cat(general)));
  Binder binder(general, training, owned, strings);
  visitCompileOptions(*bound, binder);
}

bool CompileCommandLine::parse(int argc, const char *const *argv,
                               llvm::raw_ostream &errs) {
  *bound = CompileOptions();
  cl::ResetAllOptionOccurrences();
  return cl::ParseCommandLineOptions(argc, argv, overview(), &errs);
}

void CompileCommandLine::hideOtherOptions() {
  cl::HideUnrelatedOptions({&general, &training});
}

const char *CompileCommandLine::overview() {
  return "cleave-compile: compile an ONNX model, or a program in the cleave "
         "dialect (.mlir, as cleave-opt prints it; it may declare a "
         "cleave.mesh and use collectives), into a Cleave plan (.cleave)\n\n"
         "  cleave-compile model.onnx -o model.cleave\n"
         "  cleave-compile model.onnx --emit=mlir --phase=kernels\n"
         "  cleave-compile step.mlir -o step.cleave\n";
}

} // namespace cleave
