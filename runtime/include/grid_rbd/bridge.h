/* grid_rbd/bridge.h: the runtime's C entry points for code built outside it.
 *
 * The JAX FFI handler is compiled on the user's machine against jaxlib's headers, not
 * against this runtime; it reaches the runtime through this table, whose address
 * grid_rbd._core hands out (`_core.bridge_address()`), together with the address of the
 * loaded artifact (`Artifact.native_address`). Plain C types only, so both sides may be
 * built by different compilers.
 */
#ifndef GRID_RBD_BRIDGE_H
#define GRID_RBD_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#define GRID_RBD_BRIDGE_VERSION 2
#define GRID_RBD_BRIDGE_MAX_INPUTS 8

/* Status of grid_rbd_bridge::launch. */
#define GRID_RBD_BRIDGE_OK 0
#define GRID_RBD_BRIDGE_INVALID_ARGUMENT 1  /* wrong id, batch, pointers */
#define GRID_RBD_BRIDGE_FAILED_PRECONDITION 2 /* context closed, model mutated */
#define GRID_RBD_BRIDGE_INTERNAL 3            /* the device or the artifact failed */

#ifdef __cplusplus
extern "C" {
#endif

/* One launch of a group: algorithm `algorithm_id` on caller-owned buffers (inputs in the
   algorithm's order, NULL: an omitted optional input), one output. */
typedef struct grid_rbd_bridge_call {
  int32_t algorithm_id;
  int32_t num_inputs;
  const void* inputs[GRID_RBD_BRIDGE_MAX_INPUTS];
  void* output;
  int64_t batch;
  double gravity;
} grid_rbd_bridge_call;

typedef struct grid_rbd_bridge {
  int32_t version;     /* GRID_RBD_BRIDGE_VERSION */
  int32_t struct_size; /* sizeof(grid_rbd_bridge) */
  /* One launch of algorithm `algorithm_id` of the artifact at `artifact` on context
     `ctx_id` (0: the default context), on `stream`, with caller-owned buffers: inputs in
     the algorithm's order (NULL: an omitted optional input), one output. `stamp_out` /
     `stamp_expect` are the optional 8-byte model-version stamps (see device_call.hpp).
     On failure writes a NUL-terminated message of at most `error_size` bytes. */
  int32_t (*launch)(void* artifact, uint64_t ctx_id, int32_t algorithm_id,
                    const void* const* inputs, int32_t num_inputs, void* output, int64_t batch,
                    double gravity, void* stream, void* stamp_out, const void* stamp_expect,
                    char* error, size_t error_size);
  /* Version 2: `count` launches under one admission of the context, in order, on
     `stream`; they see one model version. `stamp_expect` (optional) is read once, before
     any of them runs; `stamp_out` (optional) receives the version after the last. */
  int32_t (*launch_group)(void* artifact, uint64_t ctx_id, const grid_rbd_bridge_call* calls,
                          int32_t count, void* stream, void* stamp_out,
                          const void* stamp_expect, char* error, size_t error_size);
} grid_rbd_bridge;

/* The version of grid_rbd_launcher_call's signature below; the torch extension states the
   one it was built for, and is not used with another. */
#define GRID_RBD_LAUNCHER_CALL_VERSION 2

/* The torch extension's entry (grid_rbd/torch/native_call.cc), exported by the Python
   extension grid_rbd._core rather than by this table, since it takes Python objects:
     int grid_rbd_launcher_call(PyObject* launcher, void* output, int64_t batch,
                                double gravity, void* stream, void* stamp_out,
                                const void* stamp_expect, const void* const* inputs,
                                int32_t num_inputs);
   One launch through a `_core.DeviceLauncher` (the same admission and checks as calling
   it from Python; the stamps optional, as in `launch`), called with the GIL held; 0, 1
   when the launcher's context is closed (nothing launched, no error set), or -1 with the
   Python error set.
   Its address is `_core.launcher_call_address()`. */

/* The table (static storage; valid while the runtime is loaded). */
const grid_rbd_bridge* grid_rbd_get_bridge(void);

#ifdef __cplusplus
}
#endif

#endif /* GRID_RBD_BRIDGE_H */
