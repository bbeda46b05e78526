/* grid_rbd/abi.h: the C ABI of a grid-rbd artifact, as the runtime reads it.
 *
 * The block between the GRID_ABI_TYPES_DEFINED guards is, byte for byte, what the code
 * generator appends to every grid.cuh (grid_codegen.emit.wrapper.emit_abi_types);
 * tests/test_runtime_core.py checks that the two never drift apart. An artifact that
 * includes grid.cuh and this header together sees the types once.
 */
#ifndef GRID_RBD_ABI_H
#define GRID_RBD_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifndef GRID_ABI_TYPES_DEFINED
#define GRID_ABI_TYPES_DEFINED
#define GRID_ABI_VERSION 3
#define GRID_MAX_INPUTS 4
#define GRID_ERROR_UNSUPPORTED 8
/* The `kind` of grid_descriptor::copy. */
#define GRID_COPY_HOST_TO_DEVICE 0
#define GRID_COPY_DEVICE_TO_HOST 1
#define GRID_COPY_DEVICE_TO_DEVICE 2
extern "C" {

/* One algorithm of the artifact; shapes are per batch item (batch is axis 0). */
typedef struct grid_algorithm {
  const char* name;
  int32_t id;
  int32_t num_inputs;
  const char* input_names[GRID_MAX_INPUTS];
  int32_t input_widths[GRID_MAX_INPUTS];   /* scalars per item */
  int32_t input_required[GRID_MAX_INPUTS]; /* 0: the pointer may be NULL */
  int32_t num_outputs;                     /* 1 */
  int32_t output_rank;                     /* 1 or 2 */
  int32_t output_shape[2];                 /* unused dimensions are 1 */
  int32_t uses_gravity;
  int32_t threads_per_block;
  int64_t shared_bytes;                    /* dynamic shared memory per block */
} grid_algorithm;

/* What query_device reports: the current CUDA device, or the host. */
typedef struct grid_device_info {
  int32_t is_gpu;
  int32_t device;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t multiprocessors;                 /* SMs, or host threads */
  int32_t reserved;
  int64_t total_memory;
  int64_t free_memory;
  int64_t shared_memory_optin;
  char name[256];
} grid_device_info;

typedef struct grid_descriptor {
  int32_t abi_version;
  int32_t struct_size;
  const char* robot_name;
  int32_t nq, nv, nb, num_ees;
  const char* dtype;                       /* "float32" | "float64" */
  int32_t dtype_size;
  int32_t max_batch;
  const char* archs;                       /* "sm_90,..." or "cpu" */
  const char* strategy;                    /* "block" | "thread" */
  const char* options_json;                /* the canonical codegen options */
  int32_t is_gpu;
  int32_t runtime_inertia;
  int32_t inertia_table_size;              /* nb * 10 */
  int32_t num_algorithms;
  const grid_algorithm* algorithms;
  int (*create_state)(void** state_out);
  void (*destroy_state)(void* state);
  /* nb x 10 host scalars: m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz per body. */
  int (*set_inertia_table)(void* state, const void* host_table);
  int (*launch)(void* state, int32_t algorithm_id, const void* const* inputs,
                void* const* outputs, int32_t batch, double gravity, void* stream);
  int (*query_device)(grid_device_info* info);
  const char* (*error_string)(int32_t code);
  /* ABI 2: the URDF's inertia table and the memory entry points, so that a runtime can
     own device memory without building against the CUDA toolkit. */
  const void* default_inertia_table;       /* nb x 10 scalars of dtype, as above */
  void* (*device_alloc)(size_t bytes);     /* device memory (host memory on the CPU) */
  void (*device_free)(void* ptr);
  void* (*host_alloc_pinned)(size_t bytes); /* page-locked (64-byte aligned on the CPU) */
  void (*host_free_pinned)(void* ptr);
  /* GRID_COPY_* kind; asynchronous on `stream` under CUDA, a memcpy on the CPU. */
  int (*copy)(void* dst, const void* src, size_t bytes, int32_t kind, void* stream);
  int (*synchronize)(void* stream);
  /* ABI 3: stores `value` (8 bytes) at `dst` as work enqueued on `stream` (a one-thread
     kernel under CUDA, so a captured graph keeps the value it was captured with; a store
     on the CPU). Framework backends stamp the model version with it. */
  int (*write_stamp)(void* dst, uint64_t value, void* stream);
} grid_descriptor;

}  /* extern "C" */
#endif

#endif  /* GRID_RBD_ABI_H */
