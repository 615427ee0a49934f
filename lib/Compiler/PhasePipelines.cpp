//===- PhasePipelines.cpp - The compile's phases as registered pipelines --===//
//
// --cleave-train-step-pipeline, --cleave-partitioned-pipeline,
// --cleave-prepared-pipeline, --cleave-kernels-pipeline and
// --cleave-llvm-pipeline take cleave-compile's options as pipeline
// options (`{train=true loss=mse:y,t mesh=dp=2,tp=2}`) and add the passes
// that take an imported program to that phase: what `cleave-compile ARGS
// --print-pipeline=PHASE` prints, built from the same CompileOptions and
// checks. The options come from the option table (visitCompileOptions), so
// a flag added to cleave-compile is a pipeline option too.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Compile.h"

#include "Driver.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringSet.h"

#include <deque>
#include <memory>

using namespace mlir;

namespace cleave {
namespace {

/// cleave-compile's options as pass pipeline options: one per entry of the
/// option table, but those that choose the compile's output (the pipeline
/// is the output).
class PhasePipelineOptions : public detail::PassOptions {
public:
  PhasePipelineOptions() {
    Binder binder(*this);
    visitCompileOptions(bound, binder);
  }

  /// The parsed options, over the defaults.
  const CompileOptions &values() {
    for (const auto &store : stores)
      store();
    return bound;
  }

private:
  /// The options the table names; each store copies one parsed option's
  /// value into its field.
  CompileOptions bound;
  std::vector<std::unique_ptr<llvm::cl::Option>> owned;
  std::vector<std::function<void()>> stores;
  std::deque<std::string> strings;

  struct Binder : ScalarCompileOptionVisitor<Binder> {
    PhasePipelineOptions &self;
    explicit Binder(PhasePipelineOptions &self) : self(self) {}

    static bool skipped(const CompileOptionInfo &info) {
      static const llvm::StringSet<> outputs = {"o",
                                                "emit",
                                                "phase",
                                                "print-pipeline",
                                                "print-stats",
                                                "report",
                                                "print-memory-plan",
                                                "explain-sharding"};
      return outputs.contains(info.name);
    }
    llvm::StringRef keep(const std::string &text) {
      return self.strings.emplace_back(text);
    }
    template <typename T, typename... Extra>
    Option<T> *make(const CompileOptionInfo &info, Extra &&...extra) {
      auto option = std::make_unique<Option<T>>(self, keep(info.name),
                                                llvm::cl::desc(keep(info.help)),
                                                std::forward<Extra>(extra)...);
      Option<T> *raw = option.get();
      self.owned.push_back(std::move(option));
      return raw;
    }
    template <typename T>
    void bindScalar(const CompileOptionInfo &info, T &field) {
      if (skipped(info))
        return;
      Option<T> *option = make<T>(info, llvm::cl::init(field));
      self.stores.push_back([option, &field] { field = option->getValue(); });
    }

    void visit(const CompileOptionInfo &info,
               std::optional<std::string> &field) override {
      if (skipped(info))
        return;
      // Given or not matters (--schedule): unset unless it has a value.
      Option<std::string> *option = make<std::string>(info);
      self.stores.push_back([option, &field] {
        if (option->hasValue())
          field = option->getValue();
      });
    }
    void visit(const CompileOptionInfo &info,
               std::vector<std::string> &field) override {
      if (skipped(info))
        return;
      auto option = std::make_unique<ListOption<std::string>>(
          self, keep(info.name), llvm::cl::desc(keep(info.help)));
      ListOption<std::string> *raw = option.get();
      self.owned.push_back(std::move(option));
      self.stores.push_back([raw, &field] {
        if (raw->hasValue())
          field.assign(raw->begin(), raw->end());
      });
    }
    template <typename E>
    void bindEnum(const CompileOptionInfo &info, E &field,
                  const std::vector<CompileOptionValue<E>> &values) {
      if (skipped(info))
        return;
      Option<E> *option = make<E>(info, llvm::cl::init(field));
      for (const CompileOptionValue<E> &v : values)
        option->getParser().addLiteralOption(v.name, v.value, v.help);
      self.stores.push_back([option, &field] { field = option->getValue(); });
    }
  };
};

void registerPhasePipeline(llvm::StringRef name, llvm::StringRef description,
                           CompilePhase phase) {
  registerPassPipeline(
      name, description,
      [phase, name = name.str()](
          OpPassManager &pm, llvm::StringRef optionText,
          function_ref<LogicalResult(const llvm::Twine &)> errorHandler) {
        PhasePipelineOptions parsed;
        std::string errors;
        llvm::raw_string_ostream os(errors);
        if (failed(parsed.parseFromString(optionText, os)))
          return errorHandler(errors);
        std::string messages;
        llvm::raw_string_ostream messageStream(messages);
        CompileIO io;
        io.messages = &messageStream;
        bool ok = succeeded(addPhasePipeline(pm, parsed.values(), phase, io));
        // The checks speak as cleave-compile; here they are the pipeline's.
        std::string text;
        llvm::SmallVector<llvm::StringRef> lines;
        llvm::StringRef(messages).split(lines, '\n');
        for (llvm::StringRef line : lines) {
          if (!line.consume_front("cleave-compile: error: "))
            line.consume_front("cleave-compile: ");
          if (ok && !line.empty())
            llvm::errs() << name << ": " << line << "\n";
          else if (!line.empty())
            text += (text.empty() ? "" : "\n") + line.str();
        }
        if (!ok)
          return errorHandler(text);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(PhasePipelineOptions());
      });
}

} // namespace

void registerPhasePipelines() {
  registerPhasePipeline(
      "cleave-train-step-pipeline",
      "From an imported program to cleave-compile's train-step phase; takes "
      "cleave-compile's options (train=true loss=... optimizer=...)",
      CompilePhase::TrainStep);
  registerPhasePipeline(
      "cleave-partitioned-pipeline",
      "From an imported program to cleave-compile's partitioned phase; takes "
      "cleave-compile's options (mesh=dp=2,tp=2 zero=1 ...)",
      CompilePhase::Partitioned);
  registerPhasePipeline(
      "cleave-prepared-pipeline",
      "From an imported program to cleave-compile's prepared phase (ready "
      "for planning); takes cleave-compile's options",
      CompilePhase::Prepared);
  registerPhasePipeline(
      "cleave-kernels-pipeline",
      "From an imported program to cleave-compile's kernels phase (the plan "
      "builder's grouping, kernels outlined into module @kernels); takes "
      "cleave-compile's options",
      CompilePhase::Kernels);
  registerPhasePipeline(
      "cleave-llvm-pipeline",
      "From an imported program to cleave-compile's llvm phase (every kernel "
      "module lowered to the LLVM dialect); takes cleave-compile's options",
      CompilePhase::LLVM);
}

} // namespace cleave
