// gpu_env.h: the environment variables of the README's table, read into the
// options of the layers below (which read none themselves): the GPU layer's
// WGPT_ variables and the MPI launcher's OMPI_ ones. A bad value is an error
// naming the variable and the value. The commands call these through
// gpu_args.h; tests and tools that set the variables call them too.
#ifndef WGPT_CLI_GPU_ENV_H
#define WGPT_CLI_GPU_ENV_H

#include <stddef.h>

#include "dist/comm.h"
#include "gpu/gpu.h"

// Fills the settings of o that the caller left open (NULL, 0 or AUTO) from
// WGPT_GPU_TIMEOUT_S, WGPT_DAWN_TOGGLES(_OFF), WGPT_ROBUST, WGPT_KERNELS,
// WGPT_MATMUL_EPILOGUE (its bits are added to o's), WGPT_MATMUL_STREAMK,
// WGPT_SGM_CONFIG, WGPT_SGM_EMULATE, WGPT_COMPUTE_UNITS, WGPT_KERNEL_DIR,
// WGPT_KERNEL_STATS and WGPT_DAWN_LIB. o's strings then point into the
// environment: fill just before the open. 0, or -1 with err filled.
int wgpt_cli_gpu_env(wgpt_gpu_options *o, char *err, size_t errlen);

// The comm's view of the launcher: OMPI_COMM_WORLD_SIZE (the ranks mpirun
// started) and OMPI_MCA_odls_base_sigkill_timeout. 0, or -1 with err filled.
int wgpt_cli_comm_env(wgpt_comm_options *o, char *err, size_t errlen);

#endif
