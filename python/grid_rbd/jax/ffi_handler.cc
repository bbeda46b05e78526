// grid_rbd's XLA FFI handler: one custom call = one group of grid_rbd_bridge launches
// (one launch for a method call; the gradient and M^-1 ct for a forward-dynamics backward)
// under one admission of the context and at most one model-version stamp read.
//
// Built on the user's machine by grid_rbd/jax/_ffi_build.py with the host C++ compiler
// against the headers jaxlib ships (jax.ffi.include_dir()); no CUDA headers: the CUDA
// handler receives XLA's stream as an opaque pointer and hands it to the runtime, which
// owns every CUDA call. The runtime is reached through the bridge table whose address
// grid_rbd._core hands out, so this library does not link against it either.
//
// Operands: the data operands (every launch names its inputs by operand index), then,
// with `stamp_expect`, the forward's 8-byte model-version stamp. Results: one output per
// launch, then, with `stamp_out`, the 8-byte stamp the group writes. The batch is the
// product of the first operand's dimensions but the last, so a call jax.vmap batched with
// vmap_method="broadcast_all" is one launch over the larger batch.
//
// Two CUDA targets: grid_rbd_launch (may read a stamp: a device-to-host copy and a wait,
// which a CUDA graph cannot hold) and grid_rbd_launch_graph (never reads one), which
// declares itself command-buffer compatible so XLA may record it into a CUDA graph.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// Mirrors runtime/include/grid_rbd/bridge.h field for field (tests/test_jax_backend.py
// compares the two declarations); the version and size are checked on every call.
#define GRID_RBD_BRIDGE_MAX_INPUTS 8
extern "C" {
typedef struct grid_rbd_bridge_call {
  int32_t algorithm_id;
  int32_t num_inputs;
  const void* inputs[GRID_RBD_BRIDGE_MAX_INPUTS];
  void* output;
  int64_t batch;
  double gravity;
} grid_rbd_bridge_call;

typedef struct grid_rbd_bridge {
  int32_t version;
  int32_t struct_size;
  int32_t (*launch)(void* artifact, uint64_t ctx_id, int32_t algorithm_id,
                    const void* const* inputs, int32_t num_inputs, void* output, int64_t batch,
                    double gravity, void* stream, void* stamp_out, const void* stamp_expect,
                    char* error, size_t error_size);
  int32_t (*launch_group)(void* artifact, uint64_t ctx_id, const grid_rbd_bridge_call* calls,
                          int32_t count, void* stream, void* stamp_out,
                          const void* stamp_expect, char* error, size_t error_size);
} grid_rbd_bridge;
}

namespace {

constexpr int32_t kBridgeVersion = 2;
constexpr size_t kMaxLaunches = 4;
constexpr size_t kMaxOperands = 16;
constexpr size_t kStampBytes = 8;
constexpr int32_t kInvalidArgument = 1;
constexpr int32_t kFailedPrecondition = 2;

// The static description of one call (the custom call's attributes).
struct Group {
  uint64_t bridge;
  uint64_t artifact;
  uint64_t ctx_id;
  ffi::Span<const int64_t> algorithms;  // one per launch
  ffi::Span<const int64_t> num_inputs;  // the algorithm's input count, per launch
  ffi::Span<const int64_t> operands;    // per launch and input: operand index, -1: omitted
  ffi::Span<const int64_t> widths;      // per data operand
  ffi::Span<const int64_t> item_sizes;  // output elements per item, per launch
  ffi::Span<const double> gravities;    // per launch
  int32_t dtype_bytes;                  // 4 or 8
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

// The attribute tables agree with each other and with the operand and result counts.
bool Consistent(const Group& c, size_t data_operands, size_t args, size_t rets) {
  const size_t launches = c.algorithms.size();
  if (launches == 0 || launches > kMaxLaunches || c.num_inputs.size() != launches ||
      c.item_sizes.size() != launches || c.gravities.size() != launches ||
      c.widths.size() != data_operands || data_operands == 0 ||
      data_operands > kMaxOperands) {
    return false;
  }
  size_t slots = 0;
  for (size_t g = 0; g < launches; ++g) {
    if (c.num_inputs[g] < 1 || c.num_inputs[g] > GRID_RBD_BRIDGE_MAX_INPUTS) return false;
    slots += static_cast<size_t>(c.num_inputs[g]);
  }
  if (c.operands.size() != slots) return false;
  for (int64_t index : c.operands) {
    if (index < -1 || index >= static_cast<int64_t>(data_operands)) return false;
  }
  return args == data_operands + (c.stamp_expect ? 1 : 0) &&
         rets == launches + (c.stamp_out ? 1 : 0);
}

ffi::Error Run(void* stream, bool on_gpu, ffi::RemainingArgs args, ffi::RemainingRets rets,
               const Group& c) {
  if (c.is_gpu != on_gpu) {
    return Invalid(c.is_gpu
        ? "this robot's artifact is a CUDA build, but the call runs on the CPU; put its "
          "inputs on a GPU (jax.device_put) or register the robot with device='cuda'"
        : "this robot's artifact is a CPU build, but the call runs on a CUDA device; put "
          "its inputs on the CPU (jax.device_put(x, jax.devices('cpu')[0])) or register "
          "the robot with device='cpu'");
  }
  std::string problem;
  const grid_rbd_bridge* bridge = CheckedBridge(c.bridge, &problem);
  if (bridge == nullptr) return ffi::Error::Internal(Prefix() + problem);
  const size_t data_operands = c.widths.size();
  if (!Consistent(c, data_operands, args.size(), rets.size())) {
    return Invalid("the call's attributes do not match its " + std::to_string(args.size()) +
                   " operands and " + std::to_string(rets.size()) + " results");
  }
  const ffi::DataType dtype = c.dtype_bytes == 8 ? ffi::DataType::F64 : ffi::DataType::F32;

  // Operands: every one shares the batch (all dimensions but the last).
  std::array<const void*, kMaxOperands> data{};
  int64_t batch = -1;
  for (size_t j = 0; j < data_operands; ++j) {
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
    // An empty batch reads nothing, but XLA may hand empty buffers as null, which the
    // runtime would take for omitted inputs.
    static const double kNothing = 0.0;
    data[j] = arg->untyped_data() != nullptr ? arg->untyped_data() : &kNothing;
  }

  std::array<grid_rbd_bridge_call, kMaxLaunches> calls{};
  const size_t launches = c.algorithms.size();
  for (size_t g = 0, slot = 0; g < launches; ++g) {
    grid_rbd_bridge_call& call = calls[g];
    call.algorithm_id = static_cast<int32_t>(c.algorithms[g]);
    call.num_inputs = static_cast<int32_t>(c.num_inputs[g]);
    for (int32_t k = 0; k < call.num_inputs; ++k, ++slot) {
      const int64_t index = c.operands[slot];
      call.inputs[k] = index < 0 ? nullptr : data[static_cast<size_t>(index)];
    }
    ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> out = rets.get<ffi::AnyBuffer>(g);
    if (out.has_error()) return out.error();
    if ((*out)->element_type() != dtype ||
        static_cast<int64_t>((*out)->element_count()) != batch * c.item_sizes[g]) {
      return Invalid("result " + std::to_string(g) + " holds " +
                     std::to_string((*out)->element_count()) + " elements; expected batch " +
                     std::to_string(batch) + " x " + std::to_string(c.item_sizes[g]));
    }
    call.output = (*out)->untyped_data();
    call.batch = batch;
    call.gravity = c.gravities[g];
  }

  const void* stamp_expect = nullptr;
  if (c.stamp_expect) {
    ffi::ErrorOr<ffi::AnyBuffer> stamp = args.get<ffi::AnyBuffer>(data_operands);
    if (stamp.has_error()) return stamp.error();
    if (BytesOf(*stamp) < kStampBytes) return Invalid("the stamp operand is under 8 bytes");
    stamp_expect = stamp->untyped_data();  // under vmap, every row holds the same stamp
  }
  char* stamp_base = nullptr;
  size_t stamp_bytes = 0;
  if (c.stamp_out) {
    ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> stamp = rets.get<ffi::AnyBuffer>(launches);
    if (stamp.has_error()) return stamp.error();
    stamp_bytes = BytesOf(**stamp);
    if (stamp_bytes < kStampBytes || stamp_bytes % kStampBytes != 0) {
      return Invalid("the stamp result is not a whole number of 8-byte stamps");
    }
    stamp_base = static_cast<char*>((*stamp)->untyped_data());
  }

  char error[1024] = {0};
  void* artifact = reinterpret_cast<void*>(c.artifact);
  int32_t status = bridge->launch_group(artifact, c.ctx_id, calls.data(),
                                        static_cast<int32_t>(launches), stream, stamp_base,
                                        stamp_expect, error, sizeof(error));
  if (status != 0) return FromBridge(status, error);
  // Under jax.vmap the stamp result gains the mapped axes too: a batch-0 launch (no
  // kernel) stamps each further row, so no row is left uninitialised.
  for (size_t offset = kStampBytes; offset < stamp_bytes; offset += kStampBytes) {
    status = bridge->launch(artifact, c.ctx_id, calls[0].algorithm_id, calls[0].inputs,
                            calls[0].num_inputs, nullptr, 0, 0.0, stream, stamp_base + offset,
                            nullptr, error, sizeof(error));
    if (status != 0) return FromBridge(status, error);
  }
  return ffi::Error::Success();
}

Group MakeGroup(int64_t bridge, int64_t artifact, int64_t ctx_id,
                ffi::Span<const int64_t> algorithms, ffi::Span<const int64_t> num_inputs,
                ffi::Span<const int64_t> operands, ffi::Span<const int64_t> widths,
                ffi::Span<const int64_t> item_sizes, ffi::Span<const double> gravities,
                int32_t dtype_bytes, bool stamp_out, bool stamp_expect, bool is_gpu) {
  // Addresses and the context id arrive as int64 attributes holding the uint64 bits.
  return Group{static_cast<uint64_t>(bridge), static_cast<uint64_t>(artifact),
               static_cast<uint64_t>(ctx_id), algorithms, num_inputs, operands, widths,
               item_sizes, gravities, dtype_bytes, stamp_out, stamp_expect, is_gpu};
}

#define GRID_RBD_GROUP_PARAMS                                                          \
  int64_t bridge, int64_t artifact, int64_t ctx_id, ffi::Span<const int64_t> algorithms, \
      ffi::Span<const int64_t> num_inputs, ffi::Span<const int64_t> operands,            \
      ffi::Span<const int64_t> widths, ffi::Span<const int64_t> item_sizes,              \
      ffi::Span<const double> gravities, int32_t dtype_bytes, bool stamp_out,            \
      bool stamp_expect, bool is_gpu

#define GRID_RBD_GROUP_ARGS                                                            \
  MakeGroup(bridge, artifact, ctx_id, algorithms, num_inputs, operands, widths,        \
            item_sizes, gravities, dtype_bytes, stamp_out, stamp_expect, is_gpu)

ffi::Error LaunchOnCpu(ffi::RemainingArgs args, ffi::RemainingRets rets,
                       GRID_RBD_GROUP_PARAMS) {
  return Run(nullptr, false, args, rets, GRID_RBD_GROUP_ARGS);
}

ffi::Error LaunchOnCuda(void* stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                        GRID_RBD_GROUP_PARAMS) {
  return Run(stream, true, args, rets, GRID_RBD_GROUP_ARGS);
}

ffi::Error LaunchOnCudaInGraph(void* stream, ffi::RemainingArgs args, ffi::RemainingRets rets,
                               GRID_RBD_GROUP_PARAMS) {
  if (stamp_expect) {
    return Invalid("a stamp check cannot be recorded into a CUDA graph (it waits on the "
                   "stream); it runs on grid_rbd_launch");
  }
  return Run(stream, true, args, rets, GRID_RBD_GROUP_ARGS);
}

}  // namespace

#define GRID_RBD_LAUNCH_ATTRS                                                       \
  .Attr<int64_t>("bridge")                                                          \
      .Attr<int64_t>("artifact")                                                    \
      .Attr<int64_t>("ctx_id")                                                      \
      .Attr<ffi::Span<const int64_t>>("algorithms")                                 \
      .Attr<ffi::Span<const int64_t>>("num_inputs")                                 \
      .Attr<ffi::Span<const int64_t>>("operands")                                   \
      .Attr<ffi::Span<const int64_t>>("widths")                                     \
      .Attr<ffi::Span<const int64_t>>("item_sizes")                                 \
      .Attr<ffi::Span<const double>>("gravities")                                   \
      .Attr<int32_t>("dtype_bytes")                                                 \
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(grid_rbd_launch_cuda_graph, LaunchOnCudaInGraph,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  GRID_RBD_LAUNCH_ATTRS,
                              {ffi::Traits::kCmdBufferCompatible});
