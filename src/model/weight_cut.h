// Cutting runs of rows or columns out of host weights onto a device: tensor parallelism's shards
// (model/tensor_parallel.h). Quantized weights stay quantized where the runs line up with their
// scales (fp8: whole scale blocks; groupwise: whole groups, whole bytes of 4-bit codes; any rows),
// and are dequantized exactly first where they do not.
#pragma once

#include <vector>

#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "ops/exec_context.h"

namespace ninfer::model {

using Runs = std::vector<RankRange>;

// The runs of dimension `dim` of a contiguous host tensor, concatenated, as a new tensor on ctx's
// device: [outer, n, inner] -> [outer, sum of counts, inner].
Tensor cut_tensor(const ops::ExecContext& ctx, const TensorView& t, int dim, const Runs& runs);

// N or K of a weight [.., N, K]; or the experts E of a stack [E, N, K].
enum class WeightAxis { Rows, Cols, Experts };

// The runs of a host weight's rows, (logical) columns or experts as a weight on ctx's device. A
// weight that must be dequantized comes out dense in ctx.dtype (whole experts never must).
Weight cut_weight(const ops::ExecContext& ctx, const Weight& w, WeightAxis axis, const Runs& runs);

} // namespace ninfer::model
