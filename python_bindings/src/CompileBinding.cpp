//===- CompileBinding.cpp - cleave._cleave: compile, options, passes ------===//
//
// cleave::compile with its CompileOptions set from keyword arguments through
// the option table (no command line in between), the option table itself,
// and cleave-opt's pass manager over MLIR text.
//
//===----------------------------------------------------------------------===//

#include "Bindings.h"

#include "cleave/Compiler/Compile.h"
#include "cleave/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <mutex>

namespace nb = nanobind;

namespace cleave_py {
namespace {

/// Sets the fields of a CompileOptions from a dict of option name (as the
/// option table spells it: "input-shape") to a Python value: flags take a
/// bool, numbers an int or float (or their text), text options a str (a
/// number becomes its text), repeatable options a list of str, --emit and
/// --phase a value's name. A wrong name or type raises OptionError.
struct OptionSetter : cleave::CompileOptionVisitor {
  const nb::dict &given;
  size_t used = 0;
  explicit OptionSetter(const nb::dict &given) : given(given) {}

  /// The value given for `info`, or null.
  nb::handle find(const cleave::CompileOptionInfo &info) {
    nb::str key(info.name.c_str());
    if (!given.contains(key))
      return nb::handle();
    ++used;
    nb::handle value = given[key];
    return value.is_none() ? nb::handle() : value;
  }
  [[noreturn]] void wrong(const cleave::CompileOptionInfo &info,
                          nb::handle value, const char *expected) {
    raise("option", "option '--" + info.name + "' takes " + expected +
                        ", not " + nb::cast<std::string>(nb::repr(value)));
  }
  /// An option's text: a str, or the text of a number.
  std::string text(const cleave::CompileOptionInfo &info, nb::handle value) {
    if (nb::isinstance<nb::str>(value))
      return nb::cast<std::string>(value);
    if (nb::isinstance<nb::bool_>(value))
      return nb::cast<bool>(value) ? "true" : "false";
    if (nb::isinstance<nb::int_>(value) || nb::isinstance<nb::float_>(value))
      return nb::cast<std::string>(nb::str(value));
    wrong(info, value, "a str");
  }

  void visit(const cleave::CompileOptionInfo &info, bool &field) override {
    if (nb::handle v = find(info)) {
      if (!nb::isinstance<nb::bool_>(v))
        wrong(info, v, "True or False");
      field = nb::cast<bool>(v);
    }
  }
  void visit(const cleave::CompileOptionInfo &info, int64_t &field) override {
    nb::handle v = find(info);
    if (!v)
      return;
    if (nb::isinstance<nb::int_>(v) && !nb::isinstance<nb::bool_>(v)) {
      field = nb::cast<int64_t>(v);
      return;
    }
    if (!nb::isinstance<nb::str>(v) ||
        llvm::StringRef(nb::cast<std::string>(v)).getAsInteger(10, field))
      wrong(info, v, "an integer");
  }
  void visit(const cleave::CompileOptionInfo &info, double &field) override {
    nb::handle v = find(info);
    if (!v)
      return;
    if ((nb::isinstance<nb::int_>(v) || nb::isinstance<nb::float_>(v)) &&
        !nb::isinstance<nb::bool_>(v)) {
      field = nb::cast<double>(v);
      return;
    }
    if (!nb::isinstance<nb::str>(v) ||
        llvm::StringRef(nb::cast<std::string>(v)).getAsDouble(field))
      wrong(info, v, "a number");
  }
  void visit(const cleave::CompileOptionInfo &info,
             std::string &field) override {
    if (nb::handle v = find(info))
      field = text(info, v);
  }
  void visit(const cleave::CompileOptionInfo &info,
             std::optional<std::string> &field) override {
    if (nb::handle v = find(info))
      field = text(info, v);
  }
  void visit(const cleave::CompileOptionInfo &info,
             std::vector<std::string> &field) override {
    nb::handle v = find(info);
    if (!v)
      return;
    if (!nb::isinstance<nb::list>(v))
      wrong(info, v, "a list of str");
    for (nb::handle item : nb::borrow<nb::list>(v))
      field.push_back(text(info, item));
  }
  template <typename E>
  void pick(const cleave::CompileOptionInfo &info, E &field,
            const std::vector<cleave::CompileOptionValue<E>> &values) {
    nb::handle v = find(info);
    if (!v)
      return;
    std::string name = text(info, v), names;
    for (const cleave::CompileOptionValue<E> &value : values) {
      if (name == value.name) {
        field = value.value;
        return;
      }
      names += std::string(names.empty() ? "" : ", ") + value.name;
    }
    raise("option", "unknown value '" + name + "' of option '--" + info.name +
                        "' (expected one of " + names + ")");
  }
  void visit(const cleave::CompileOptionInfo &info, cleave::EmitKind &field,
             const std::vector<cleave::CompileOptionValue<cleave::EmitKind>>
                 &values) override {
    pick(info, field, values);
  }
  void visit(const cleave::CompileOptionInfo &info, cleave::CompilePhase &field,
             const std::vector<cleave::CompileOptionValue<cleave::CompilePhase>>
                 &values) override {
    pick(info, field, values);
  }
};

} // namespace

/// Compiles the model at `path` with `options` (see OptionSetter); returns
/// (plan bytes or None, MLIR text printed, messages, report). A failure
/// raises CompileError with the messages.
nb::tuple compile(const std::string &path, const nb::dict &options) {
  cleave::CompileOptions compileOptions;
  compileOptions.input = path;
  OptionSetter setter(options);
  cleave::visitCompileOptions(compileOptions, setter);
  if (setter.used != options.size()) {
    for (auto [key, value] : options) {
      std::string name = nb::cast<std::string>(nb::str(key));
      bool known = false;
      for (const cleave::CompileOptionInfo &o : cleave::compileOptionTable())
        known |= o.name == name;
      if (!known)
        raise("option", "unknown option '--" + name + "'");
    }
  }
  std::string messages, output, report;
  std::vector<uint8_t> plan;
  bool havePlan = false;
  int rc;
  {
    nb::gil_scoped_release release;
    llvm::raw_string_ostream messageStream(messages), outputStream(output),
        reportStream(report);
    cleave::CompileIO io;
    io.messages = &messageStream;
    io.output = &outputStream;
    io.report = &reportStream;
    io.planSink = [&](std::vector<uint8_t> bytes) {
      plan = std::move(bytes);
      havePlan = true;
    };
    rc = cleave::compile(compileOptions, io);
  }
  if (rc != 0)
    raise("compile", messages);
  nb::object planBytes =
      havePlan
          ? nb::bytes(reinterpret_cast<const char *>(plan.data()), plan.size())
          : nb::none();
  return nb::make_tuple(planBytes, output, messages, report);
}

std::vector<nb::tuple> optionTable() {
  std::vector<nb::tuple> rows;
  for (const cleave::CompileOptionInfo &o : cleave::compileOptionTable()) {
    const char *kind = o.kind == cleave::CompileOptionInfo::Flag   ? "flag"
                       : o.kind == cleave::CompileOptionInfo::List ? "list"
                                                                   : "value";
    rows.push_back(nb::make_tuple(o.name, kind, o.valueName, o.help));
  }
  return rows;
}

namespace {
/// The dialects and passes cleave-opt has, registered once.
mlir::DialectRegistry &registry() {
  static mlir::DialectRegistry *r = [] {
    mlir::registerAllPasses();
    cleave::registerAllPasses();
    auto *registry = new mlir::DialectRegistry;
    mlir::registerAllDialects(*registry);
    mlir::registerAllExtensions(*registry);
    cleave::registerAllDialects(*registry);
    return registry;
  }();
  return *r;
}

} // namespace

/// Parses `source`, runs `pipeline` (a textual pass pipeline on the module,
/// with or without its "builtin.module(...)" anchor) and prints the result
/// as cleave-opt does.
std::string runPasses(const std::string &source, const std::string &pipeline) {
  std::string messages, result;
  {
    nb::gil_scoped_release release;
    static std::mutex mutex; // The pass registry is global.
    std::lock_guard<std::mutex> lock(mutex);
    mlir::MLIRContext context(registry());
    llvm::raw_string_ostream errors(messages);
    mlir::ScopedDiagnosticHandler handler(
        &context, [&](mlir::Diagnostic &diag) {
          diag.getLocation().print(errors);
          errors << ": "
                 << (diag.getSeverity() == mlir::DiagnosticSeverity::Error
                         ? "error: "
                     : diag.getSeverity() == mlir::DiagnosticSeverity::Warning
                         ? "warning: "
                         : "note: ")
                 << diag.str() << "\n";
          return mlir::success();
        });
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "<input>"), llvm::SMLoc());
    mlir::OwningOpRef<mlir::Operation *> module =
        mlir::parseSourceFile(sourceMgr, mlir::ParserConfig(&context));
    if (!module) {
      messages = "cannot parse the input: " + messages;
    } else {
      // Passes for the module itself; "builtin.module(...)" says the same.
      llvm::StringRef text = llvm::StringRef(pipeline).trim();
      if (text.starts_with("builtin.module(") && text.ends_with(")"))
        text = text.drop_front(strlen("builtin.module(")).drop_back();
      std::string anchored = text.str();
      mlir::PassManager pm(&context, module.get()->getName().getStringRef());
      std::string pipelineErrors;
      llvm::raw_string_ostream pipelineStream(pipelineErrors);
      if (mlir::failed(mlir::parsePassPipeline(anchored, pm, pipelineStream))) {
        messages = "bad pass pipeline '" + pipeline + "': " + pipelineErrors;
      } else if (mlir::succeeded(pm.run(module.get())) &&
                 mlir::succeeded(mlir::verify(module.get()))) {
        llvm::raw_string_ostream out(result);
        module.get()->print(out);
        out << "\n";
        messages.clear();
      } else if (messages.empty()) {
        messages = "the pass pipeline failed";
      }
    }
  }
  if (!messages.empty())
    raise("compile", llvm::StringRef(messages).rtrim().str());
  return result;
}

} // namespace cleave_py
