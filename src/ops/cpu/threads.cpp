#include <cblas.h>
#include <omp.h>

#include "ops/exec_context.h"

namespace ninfer::ops {

void set_cpu_threads(int n) {
    if (n <= 0) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

} // namespace ninfer::ops
