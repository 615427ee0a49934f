//===- InitAll.h - Register every Cleave dialect and pass -------*- C++ -*-===//

#ifndef CLEAVE_INITALL_H
#define CLEAVE_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace cleave {
/// Adds the cleave dialect and the upstream dialects Cleave's pipelines use.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Registers every Cleave pass and pipeline with the global registry.
void registerAllPasses();
} // namespace cleave

#endif // CLEAVE_INITALL_H
