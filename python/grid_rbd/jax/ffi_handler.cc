// grid_rbd's XLA FFI handler: one custom call = one grid_rbd_bridge::launch.
//
// Built on the user's machine by grid_rbd/jax/_ffi_build.py with the host C++ compiler
// against the headers jaxlib ships (jax.ffi.include_dir()); no CUDA headers: the CUDA
// handler receives XLA's stream as an opaque pointer and hands it to the runtime, which
// owns every CUDA call. The runtime is reached through the bridge table whose address
// grid_rbd._core hands out, so this library does not link against it either.
//
// Operands: the algorithm's present inputs in its order (the `present` bit mask says
// which), then, with `stamp_expect`, the forward's 8-byte model-version stamp.
// Results: the output, then, with `stamp_out`, the 8-byte stamp this launch writes.
// The batch is the product of the first operand's dimensions but the last, so a call
// jax.vmap batched with vmap_method="broadcast_all" is one launch over the larger batch.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Mirrors runtime/include/grid_rbd/bridge.h field for field (tests/test_jax_backend.py
// compares the two declarations); the version and size are checked on every call.
extern "C" {
typedef struct grid_rbd_bridge {
  int32_t version;
  int32_t struct_size;
  int32_t (*launch)(void* artifact, uint64_t ctx_id, int32_t algorithm_id,
                    const void* const* inputs, int32_t num_inputs, void* output, int64_t batch,
                    double gravity, void* stream, void* stamp_out, const void* stamp_expect,
                    char* error, size_t error_size);
} grid_rbd_bridge;
}

namespace {

constexpr int32_t kBridgeVersion = 1;
constexpr int32_t kMaxInputs = 16;
constexpr size_t kStampBytes = 8;
constexpr int32_t kInvalidArgument = 1;
constexpr int32_t kFailedPrecondition = 2;

// The static description of one launch (the custom call's attributes).
struct Launch {
  uint64_t bridge;
  uint64_t artifact;
  uint64_t ctx_id;
  int32_t algorithm;
  int32_t num_inputs;
  int32_t present;
  ffi::Span<const int64_t> widths;  // per item, one per present input
  int64_t item_size;                // output elements per item
  int32_t dtype_bytes;              // 4 or 8
  double gravity;
  bool stamp_out;
  bool stamp_expect;
  bool is_gpu;
};

std::string Prefix() { return "grid_rbd JAX FFI: "; }

ffi::Error Invalid(const std::string& message) {
  return ffi::Error::InvalidArgument(Prefix() + message);
}

ffi::Error FromBridge(int32_t status, const char* message) {
  std::string text = Prefix() + message;
  if (status == kInvalidArgument) return ffi::Error::InvalidArgument(text);
  if (status == kFailedPrecondition) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition, std::move(text));
  }
  return ffi::Error::Internal(std::move(text));
}

const grid_rbd_bridge* CheckedBridge(uint64_t address, std::string* problem) {
  const auto* bridge = reinterpret_cast<const grid_rbd_bridge*>(address);
  if (bridge == nullptr) {
    *problem = "no runtime bridge (grid_rbd._core.bridge_address() was 0)";
  } else if (bridge->version != kBridgeVersion ||
             bridge->struct_size != static_cast<int32_t>(sizeof(grid_rbd_bridge))) {
    *problem = "the runtime's bridge is version " + std::to_string(bridge->version) + " (" +
               std::to_string(bridge->struct_size) + " bytes); this handler was built for "
               "version " + std::to_string(kBridgeVersion) + " (" +
               std::to_string(sizeof(grid_rbd_bridge)) + " bytes): clear the jax_ffi "
               "folder of the grid-rbd cache so it is rebuilt against the installed runtime";
  } else {
    return bridge;
  }
  return nullptr;
}

size_t BytesOf(const ffi::AnyBuffer& buffer) {
  return ffi::ByteWidth(buffer.element_type()) * buffer.element_count();
}

ffi::Error Run(void* stream, bool on_gpu, ffi::RemainingArgs args, ffi::RemainingRets rets,
               const Launch& c) {
  if (c.is_gpu != on_gpu) {
    return Invalid(c.is_gpu
        ? "this robot's artifact is a CUDA build, but the call runs on the CPU; put its "
          "inputs on a GPU (jax.device_put) or register the robot with device='cpu'"
        : "this robot's artifact is a CPU build, but the call runs on a CUDA device; put "
          "its inputs on the CPU (jax.device_put(x, jax.devices('cpu')[0])) or register "
          "the robot with device='cuda'");
  }
  std::string problem;
  const grid_rbd_bridge* bridge = CheckedBridge(c.bridge, &problem);
  if (bridge == nullptr) return ffi::Error::Internal(Prefix() + problem);
  if (c.num_inputs < 1 || c.num_inputs > kMaxInputs) {
    return Invalid("num_inputs " + std::to_string(c.num_inputs) + " is out of range");
  }

  int32_t num_present = 0;
  for (int32_t k = 0; k < c.num_inputs; ++k) num_present += (c.present >> k) & 1;
  const size_t expected_args = num_present + (c.stamp_expect ? 1 : 0);
  const size_t expected_rets = 1 + (c.stamp_out ? 1 : 0);
  if (args.size() != expected_args || rets.size() != expected_rets ||
      c.widths.size() != static_cast<size_t>(num_present) || num_present == 0) {
    return Invalid("expected " + std::to_string(expected_args) + " operands and " +
                   std::to_string(expected_rets) + " results, got " +
                   std::to_string(args.size()) + " and " + std::to_string(rets.size()));
  }
  const ffi::DataType dtype = c.dtype_bytes == 8 ? ffi::DataType::F64 : ffi::DataType::F32;

  // Inputs: every present one shares the batch (all dimensions but the last).
  std::vector<const void*> inputs(c.num_inputs, nullptr);
  int64_t batch = -1;
  for (int32_t k = 0, j = 0; k < c.num_inputs; ++k) {
    if (((c.present >> k) & 1) == 0) continue;
    ffi::ErrorOr<ffi::AnyBuffer> arg = args.get<ffi::AnyBuffer>(j);
    if (arg.has_error()) return arg.error();
    const ffi::AnyBuffer::Dimensions dims = arg->dimensions();
    if (arg->element_type() != dtype || dims.size() == 0) {
      return Invalid("operand " + std::to_string(j) + " is not a floating array of the "
                     "artifact's dtype with a batch axis");
    }
    int64_t leading = 1;
    for (size_t d = 0; d + 1 < dims.size(); ++d) leading *= dims[d];
    if (batch < 0) batch = leading;
    if (leading != batch || dims[dims.size() - 1] != c.widths[j]) {
      return Invalid("operand " + std::to_string(j) + " holds " +
                     std::to_string(arg->element_count()) + " elements; expected batch " +
                     std::to_string(batch) + " x width " + std::to_string(c.widths[j]));
    }
    inputs[k] = arg->untyped_data();
    ++j;
  }
  // An empty batch reads nothing, but XLA may hand empty buffers as null, which the
  // runtime would take for omitted inputs.
  static const double kNothing = 0.0;
  for (int32_t k = 0; batch == 0 && k < c.num_inputs; ++k) {
    if (((c.present >> k) & 1) != 0 && inputs[k] == nullptr) inputs[k] = &kNothing;
  }

  ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> out = rets.get<ffi::AnyBuffer>(0);
  if (out.has_error()) return out.error();
  if ((*out)->element_type() != dtype ||
      static_cast<int64_t>((*out)->element_count()) != batch * c.item_size) {
    return Invalid("the output holds " + std::to_string((*out)->element_count()) +
                   " elements; expected batch " + std::to_string(batch) + " x " +
                   std::to_string(c.item_size));
  }

  const void* stamp_expect = nullptr;
  if (c.stamp_expect) {
    ffi::ErrorOr<ffi::AnyBuffer> stamp = args.get<ffi::AnyBuffer>(num_present);
    if (stamp.has_error()) return stamp.error();
    if (BytesOf(*stamp) < kStampBytes) return Invalid("the stamp operand is under 8 bytes");
    stamp_expect = stamp->untyped_data();  // under vmap, every row holds the same stamp
  }
  std::vector<char*> stamp_slots;
  if (c.stamp_out) {
    ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> stamp = rets.get<ffi::AnyBuffer>(1);
    if (stamp.has_error()) return stamp.error();
    const size_t bytes = BytesOf(**stamp);
    if (bytes < kStampBytes || bytes % kStampBytes != 0) {
      return Invalid("the stamp result is not a whole number of 8-byte stamps");
    }
    auto* base = static_cast<char*>((*stamp)->untyped_data());
    for (size_t offset = 0; offset < bytes; offset += kStampBytes) {
      stamp_slots.push_back(base + offset);
    }
  }

  char error[1024] = {0};
  void* artifact = reinterpret_cast<void*>(c.artifact);
  int32_t status = bridge->launch(artifact, c.ctx_id, c.algorithm, inputs.data(),
                                  c.num_inputs, (*out)->untyped_data(), batch, c.gravity,
                                  stream, stamp_slots.empty() ? nullptr : stamp_slots[0],
                                  stamp_expect, error, sizeof(error));
  if (status != 0) return FromBridge(status, error);
  // Under jax.vmap the stamp result gains the mapped axes too: a batch-0 launch (no
  // kernel) stamps each further row, so no row is left uninitialised.
  for (size_t s = 1; s < stamp_slots.size(); ++s) {
    status = bridge->launch(artifact, c.ctx_id, c.algorithm, inputs.data(), c.num_inputs,
                            nullptr, 0, c.gravity, stream, stamp_slots[s], nullptr, error,
                            sizeof(error));
    if (status != 0) return FromBridge(status, error);
  }
  return ffi::Error::Success();
}

// Addresses and the context id arrive as int64 attributes holding the uint64 bits.
ffi::Error LaunchOnCpu(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t bridge,
                       int64_t artifact, int64_t ctx_id, int32_t algorithm,
                       int32_t num_inputs, int32_t present, ffi::Span<const int64_t> widths,
                       int64_t item_size, int32_t dtype_bytes, double gravity,
                       bool stamp_out, bool stamp_expect, bool is_gpu) {
  const Launch c{static_cast<uint64_t>(bridge), static_cast<uint64_t>(artifact),
                 static_cast<uint64_t>(ctx_id), algorithm, num_inputs, present, widths,
                 item_size, dtype_bytes, gravity, stamp_out, stamp_expect, is_gpu};
  return Run(nullptr, false, args, rets, c);
}

ffi::Error LaunchOnCuda(void* stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                        int64_t bridge, int64_t artifact, int64_t ctx_id,
                        int32_t algorithm, int32_t num_inputs, int32_t present,
                        ffi::Span<const int64_t> widths, int64_t item_size,
                        int32_t dtype_bytes, double gravity, bool stamp_out,
                        bool stamp_expect, bool is_gpu) {
  const Launch c{static_cast<uint64_t>(bridge), static_cast<uint64_t>(artifact),
                 static_cast<uint64_t>(ctx_id), algorithm, num_inputs, present, widths,
                 item_size, dtype_bytes, gravity, stamp_out, stamp_expect, is_gpu};
  return Run(stream, true, args, rets, c);
}

}  // namespace

#define GRID_RBD_LAUNCH_ATTRS                                                       \
  .Attr<int64_t>("bridge")                                                          \
      .Attr<int64_t>("artifact")                                                    \
      .Attr<int64_t>("ctx_id")                                                      \
      .Attr<int32_t>("algorithm")                                                   \
      .Attr<int32_t>("num_inputs")                                                  \
      .Attr<int32_t>("present")                                                     \
      .Attr<ffi::Span<const int64_t>>("widths")                                     \
      .Attr<int64_t>("item_size")                                                   \
      .Attr<int32_t>("dtype_bytes")                                                 \
      .Attr<double>("gravity")                                                      \
      .Attr<bool>("stamp_out")                                                      \
      .Attr<bool>("stamp_expect")                                                   \
      .Attr<bool>("is_gpu")

XLA_FFI_DEFINE_HANDLER_SYMBOL(grid_rbd_launch_cpu, LaunchOnCpu,
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets()
                                  GRID_RBD_LAUNCH_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(grid_rbd_launch_cuda, LaunchOnCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  GRID_RBD_LAUNCH_ATTRS);
