// Validating a host (numpy) call: arrays in, a launch plan out.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// A host array as a binding sees it (numpy here): its data, shape, dtype and layout.
/// `data == nullptr` with `present == false` is an omitted optional input.
struct HostArray {
  bool present = false;
  const void* data = nullptr;
  std::vector<int64_t> shape;
  std::string dtype;  // numpy's name: "float64", "float32", ">f8", ...
  bool c_contiguous = false;
  bool writable = false;
};

/// A validated call: host pointers in the algorithm's input order, and sizes for staging.
struct CallPlan {
  const grid_algorithm* algorithm = nullptr;
  int32_t batch = 0;
  std::array<const void*, GRID_MAX_INPUTS> inputs{};   // nullptr: omitted optional input
  std::array<size_t, GRID_MAX_INPUTS> input_bytes{};   // 0 when omitted
  void* output = nullptr;
  size_t output_bytes = 0;
};

/// Checks `inputs` (the algorithm's inputs in order; trailing optional ones may be left
/// out) and `out` against the artifact, and returns the plan. Throws ArgumentError naming
/// the argument and what was expected: unknown algorithm, too many inputs, a required
/// input missing, a wrong dtype, rank, width or layout, batches that disagree, a batch
/// above max_batch, an `out` of the wrong size, dtype or layout or read-only.
CallPlan plan_call(const ArtifactLibrary& library, const std::string& algorithm,
                   const std::vector<HostArray>& inputs, const HostArray& out);

}  // namespace grid_rbd
