/* grid/abi.h: the C ABI of a grid-rbd artifact.
 *
 * One header, two readers: the code generator inlines it at the end of every generated
 * grid.cuh (so a consumer including grid.cuh sees the types), and the runtime library
 * includes it from here. An artifact exports one symbol, grid_get_descriptor(), which
 * returns the descriptor below; `abi_version` and `struct_size` are checked first.
 *
 * Version 4 adds strategy variants: an algorithm is built in one or more variants
 * (thread / warp / block per item), a per-call launch configuration may pick one and a
 * launch width, and otherwise the artifact dispatches by batch size from a per-state
 * table (set_dispatch), initialised from the descriptor's defaults (the cost model's
 * choice, grid_codegen.dispatch).
 *
 * Version 5 adds the runtime tables of joint dynamics and of joint origins (their sizes,
 * the URDF's defaults, a setter each).
 */
#ifndef GRID_ABI_TYPES_DEFINED
#define GRID_ABI_TYPES_DEFINED
#include <stddef.h>
#include <stdint.h>

#define GRID_ABI_VERSION 5
#define GRID_MAX_INPUTS 4
#define GRID_MAX_VARIANTS 4
#define GRID_MAX_DISPATCH 8
/* Status codes of every entry point (the text is error_string's). */
#define GRID_OK 0                      /* success */
#define GRID_ERROR_INVALID_ARGUMENT 1  /* invalid argument */
#define GRID_ERROR_BATCH_TOO_LARGE 2   /* batch exceeds the artifact's max_batch */
#define GRID_ERROR_UNKNOWN_ALGORITHM 3 /* unknown algorithm id */
#define GRID_ERROR_NULL_POINTER 4      /* a required input or output pointer is NULL */
#define GRID_ERROR_DEVICE 5            /* device (CUDA) error */
#define GRID_ERROR_OUT_OF_MEMORY 6     /* out of memory */
#define GRID_ERROR_ARCH_MISMATCH 7     /* the artifact has no kernel image for this device */
#define GRID_ERROR_UNSUPPORTED 8       /* this artifact was built without runtime_inertia */
/* The `kind` of grid_descriptor::copy. */
#define GRID_COPY_HOST_TO_DEVICE 0
#define GRID_COPY_DEVICE_TO_HOST 1
#define GRID_COPY_DEVICE_TO_DEVICE 2
#ifdef __cplusplus
extern "C" {
#endif

/* One compiled variant of an algorithm. */
typedef struct grid_variant {
  const char* name;                        /* "thread", "warp", "block" */
  int32_t threads_per_block;               /* the default launch width (GPU) */
  int32_t max_threads_per_block;           /* the kernel's launch bound (GPU) */
  int32_t items_per_block;                 /* at the default width: 1 (block), width/32, width */
  int32_t reserved;
  int64_t shared_bytes;                    /* dynamic shared memory per block, default width */
  int64_t ops_per_item;                    /* traced operation count (0: not traced) */
} grid_variant;

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
  int32_t num_variants;
  grid_variant variants[GRID_MAX_VARIANTS];
  /* The default dispatch: variant dispatch_variant[k] serves batches of at least
     dispatch_min_batch[k] (ascending; the first threshold is 1). */
  int32_t num_dispatch;
  int32_t dispatch_min_batch[GRID_MAX_DISPATCH];
  int32_t dispatch_variant[GRID_MAX_DISPATCH];
} grid_algorithm;

/* A per-call launch configuration; zero-initialised it means "the defaults". */
typedef struct grid_launch_config {
  int32_t variant;     /* 0: dispatch by batch size; k in 1..num_variants: variant k - 1 */
  int32_t threads;     /* GPU: threads per block (0: the variant's default); CPU: host
                          threads (0: OpenMP's default, omp_get_max_threads()) */
  int32_t max_blocks;  /* GPU: cap on the grid size, the rest grid-strides (0: none) */
  int32_t reserved;
} grid_launch_config;

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
  const char* strategy;                    /* the requested strategy: "auto" | "thread" | ... */
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
  /* launch with the defaults (dispatch by batch, default widths) */
  int (*launch)(void* state, int32_t algorithm_id, const void* const* inputs,
                void* const* outputs, int32_t batch, double gravity, void* stream);
  int (*query_device)(grid_device_info* info);
  const char* (*error_string)(int32_t code);
  /* The URDF's inertia table and the memory entry points, so that a runtime can own
     device memory without building against the CUDA toolkit. */
  const void* default_inertia_table;       /* nb x 10 scalars of dtype, as above */
  void* (*device_alloc)(size_t bytes);     /* device memory (host memory on the CPU) */
  void (*device_free)(void* ptr);
  void* (*host_alloc_pinned)(size_t bytes); /* page-locked (64-byte aligned on the CPU) */
  void (*host_free_pinned)(void* ptr);
  /* GRID_COPY_* kind; asynchronous on `stream` under CUDA, a memcpy on the CPU. */
  int (*copy)(void* dst, const void* src, size_t bytes, int32_t kind, void* stream);
  int (*synchronize)(void* stream);
  /* Stores `value` (8 bytes) at `dst` as work enqueued on `stream` (a one-thread kernel
     under CUDA, so a captured graph keeps the value it was captured with; a store on the
     CPU). Framework backends stamp the model version with it. */
  int (*write_stamp)(void* dst, uint64_t value, void* stream);
  /* ABI 4: variants and dispatch. `config` may be NULL (the defaults). */
  int (*launch_ex)(void* state, int32_t algorithm_id, const grid_launch_config* config,
                   const void* const* inputs, void* const* outputs, int32_t batch,
                   double gravity, void* stream);
  /* Replace this state's dispatch table of one algorithm: `count` (1..GRID_MAX_DISPATCH)
     ascending thresholds starting at 1, each naming a variant; count 0 restores the
     descriptor's default. */
  int (*set_dispatch)(void* state, int32_t algorithm_id, int32_t count,
                      const int32_t* min_batch, const int32_t* variant);
  /* The variant a launch of `batch` items would use on this state (-1 on error). */
  int32_t (*chosen_variant)(void* state, int32_t algorithm_id, int32_t batch);
  int32_t cpu_simd_width;                  /* items per SIMD vector of the CPU build (1 on GPU) */
  int32_t reserved;
  /* Joint dynamics (grid_codegen.joint_dynamics): the table is [damping (n) | friction (n)]
     over the n joint-dynamics dofs (tangent dofs less a free flyer's), scalars of dtype.
     joint_dynamics_table_size is 2 n when the terms are on, else 0 (and the default table
     NULL); set_joint_dynamics_table answers GRID_ERROR_UNSUPPORTED unless
     runtime_joint_dynamics. */
  int32_t runtime_joint_dynamics;
  int32_t joint_dynamics_table_size;
  const void* default_joint_dynamics_table;
  int (*set_joint_dynamics_table)(void* state, const void* host_table);
  /* Joint origins (grid_codegen.transforms): 7 scalars of dtype per joint (body order),
     [p (3) | unit quaternion xyzw (4)] of the parent body -> joint frame placement.
     transform_table_size is 7 nb when runtime_transform, else 0 (and the default table
     NULL); set_transform_table answers GRID_ERROR_UNSUPPORTED unless runtime_transform. */
  int32_t runtime_transform;
  int32_t transform_table_size;
  const void* default_transform_table;
  int (*set_transform_table)(void* state, const void* host_table);
} grid_descriptor;

#ifdef __cplusplus
}  /* extern "C" */
#endif
#endif
