//===- InitAll.cpp - Register every Cleave dialect and pass ---------------===//

#include "cleave/InitAll.h"

#include "Cleave/IR/CleaveDialect.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Plan/Passes.h"
#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Target/CUDA/CUDACodegen.h"
#include "cleave/Transforms/Autodiff.h"
#include "cleave/Transforms/Autodiff/Passes.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/Sharding/PartitionOpInterface.h"
#include "cleave/Transforms/Sharding/Passes.h"
#include "cleave/Transforms/Training/Passes.h"

#include "mlir/IR/DialectRegistry.h"

void cleave::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::cleave::CleaveDialect>();
  registerVJPExternalModels(registry);
  mlir::cleave::partition::registerPartitionExternalModels(registry);
}

void cleave::registerAllPasses() {
  registerCleaveTransformsPasses();
  registerCleaveAutodiffPasses();
  mlir::cleave::registerCleaveConversionPasses();
  registerCleaveTrainingPasses();
  registerCleaveShardingPasses();
  registerCleavePlanPasses();
  registerCPUPipelines();
  registerCUDAPipelines();
  registerPipelines();
}
