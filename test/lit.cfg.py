# Cleave lit configuration: runs the .mlir and .test files under test/.
import os
import shutil

import lit.formats

config.name = "Cleave"
config.test_format = lit.formats.ShTest(not config.is_windows if hasattr(config, "is_windows") else True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "runtime", "conformance", "benchmarks"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.cleave_obj_root, "test")

# Tools: the project's own binaries first, then LLVM's FileCheck/not.
config.environment["PATH"] = os.pathsep.join(
    [config.cleave_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Compiles share one kernel cache in the build directory, not the user's.
config.environment["CLEAVE_CACHE_DIR"] = os.path.join(config.test_exec_root, "kernel-cache")
config.substitutions.append(("%cleave_src", config.cleave_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%cleave_bin", config.cleave_tools_dir))
config.substitutions.append(("%cleave_obj", config.cleave_obj_root))
# Multi-process tests: OpenMPI's mpirun, allowed to run as root and to start
# more ranks than the machine has cores.
if getattr(config, "cleave_have_mpi", False) and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    config.substitutions.append(("%mpirun", "mpirun --oversubscribe -np"))
# Processes that meet over Gloo as torchrun's workers do (launch_ranks.py
# sets torchrun's variables by hand), and torchrun itself: $CLEAVE_TORCHRUN,
# else torchrun on the PATH (installed with PyTorch; absent, its test is
# skipped).
if getattr(config, "cleave_have_gloo", False):
    config.available_features.add("gloo")
    torchrun = os.environ.get("CLEAVE_TORCHRUN") or shutil.which("torchrun")
    if torchrun and os.access(torchrun, os.X_OK):
        config.available_features.add("torchrun")
        config.substitutions.append(("%torchrun", torchrun))

# The chaos tests of restarts (e2e/chaos*.test, ~35 s together on 2 cores):
# `lit --param skip_chaos=1` leaves them out.
if not lit_config.params.get("skip_chaos"):
    config.available_features.add("chaos")
if shutil.which("onnxruntime_test", path=config.environment["PATH"]) or os.path.exists(config.python_executable):
    config.available_features.add("python")
# CUDA codegen tests that assemble cubins need ptxas (the CUDA toolkit).
if os.path.exists("/usr/local/cuda/bin/ptxas"):
    config.available_features.add("ptxas")
# The strict host doubles of libcuda, cuBLASLt and NCCL (test/doubles): CUDA
# plans compiled with --cuda-host-kernels run under `%cuda_doubles cleave-run
# --backend cuda ...` where there is no GPU.
doubles = os.path.join(config.cleave_obj_root, "lib", "doubles")
double_libs = {
    "CLEAVE_CUDA_DRIVER_LIBRARY": "libcleave-cuda-double.so",
    "CLEAVE_CUBLASLT_LIBRARY": "libcleave-cublaslt-double.so",
    "CLEAVE_NCCL_LIBRARY": "libcleave-nccl-double.so",
}
if all(os.path.exists(os.path.join(doubles, lib)) for lib in double_libs.values()):
    config.available_features.add("cuda-doubles")
    config.substitutions.append(("%cuda_doubles", "env " + " ".join(
        "%s=%s" % (var, os.path.join(doubles, lib)) for var, lib in double_libs.items())))
