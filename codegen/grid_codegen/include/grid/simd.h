/* grid/simd.h: the CPU build's vectors of batch items.
 *
 * On the host every strategy runs on vectors of kSimdBytes / sizeof(S) batch items, one
 * register wide: 32 bytes when the compiler may use AVX, else 16 (SSE, NEON). A vector
 * wider than the machine's registers is split by the compiler into register halves: the
 * same instructions per item, but g++ then takes 2.2-2.8x longer on the long
 * straight-line code (g1's ID gradient unit, float32: 111 s against 39 s), and the split
 * code ran no faster (iiwa14, SSE only, one core: FD gradient 1.52 -> 1.40 us per item
 * float32, 2.94 -> 2.49 us float64). So every arithmetic operation works on that many
 * items at once:
 * - the thread strategy's traced straight-line code on `vec<S>`, a plain GCC/Clang vector
 *   type (a class around one multiplies the compile time of long straight-line code);
 *   that code needs only + - * / (with scalar S operands too), unary minus, T{} and the
 *   math functions below;
 * - the block and warp strategies' item functions on `lanes<S>`, a small class around
 *   the same vector that also converts from numbers (`T(0)`) and has compound
 *   assignment, as their hand-written loops use.
 * A tile of items is transposed in (load_tile) and out (store_tile); the lanes past the
 * end of the batch repeat its last item, so they compute valid numbers that are never
 * stored.
 */
#if !GRID_IS_CUDA
#include <math.h>

namespace grid {

#if defined(__AVX__)
constexpr int kSimdBytes = 32;
#else
constexpr int kSimdBytes = 16;
#endif

template <typename S>
struct vec_of;
template <>
struct vec_of<float> {
  typedef float type __attribute__((vector_size(kSimdBytes)));
};
template <>
struct vec_of<double> {
  typedef double type __attribute__((vector_size(kSimdBytes)));
};
template <typename S>
using vec = typename vec_of<S>::type;
template <typename S>
constexpr int simd_width() {
  return kSimdBytes / (int)sizeof(S);
}

template <typename S>
struct lanes {
  typedef S scalar;
  vec<S> v;

  lanes() = default;
  lanes(S s) : v(vec<S>{} + s) {}  // NOLINT: broadcast, as T(0.5) in generated code
  static lanes of(vec<S> x) {
    lanes r;
    r.v = x;
    return r;
  }
  friend lanes operator+(lanes a, lanes b) { return of(a.v + b.v); }
  friend lanes operator-(lanes a, lanes b) { return of(a.v - b.v); }
  friend lanes operator*(lanes a, lanes b) { return of(a.v * b.v); }
  friend lanes operator/(lanes a, lanes b) { return of(a.v / b.v); }
  friend lanes operator-(lanes a) { return of(-a.v); }
  lanes& operator+=(lanes b) { v += b.v; return *this; }
  lanes& operator-=(lanes b) { v -= b.v; return *this; }
  lanes& operator*=(lanes b) { v *= b.v; return *this; }
  lanes& operator/=(lanes b) { v /= b.v; return *this; }
};

#define GRID_SIMD_UNARY(fn, S)                                          \
  inline vec<S> fn(vec<S> a) {                                          \
    vec<S> r;                                                           \
    for (int k = 0; k < simd_width<S>(); ++k) r[k] = fn(a[k]);          \
    return r;                                                           \
  }                                                                     \
  inline lanes<S> fn(lanes<S> a) { return lanes<S>::of(fn(a.v)); }
GRID_SIMD_UNARY(sqrt_, float)
GRID_SIMD_UNARY(sqrt_, double)
GRID_SIMD_UNARY(sin_, float)
GRID_SIMD_UNARY(sin_, double)
GRID_SIMD_UNARY(cos_, float)
GRID_SIMD_UNARY(cos_, double)
GRID_SIMD_UNARY(tanh_, float)
GRID_SIMD_UNARY(tanh_, double)
GRID_SIMD_UNARY(sign_, float)
GRID_SIMD_UNARY(sign_, double)
#undef GRID_SIMD_UNARY
inline SinCos<vec<float>> sincos_(vec<float> a) { return {sin_(a), cos_(a)}; }
inline SinCos<vec<double>> sincos_(vec<double> a) { return {sin_(a), cos_(a)}; }
inline SinCos<lanes<float>> sincos_(lanes<float> a) { return {sin_(a), cos_(a)}; }
inline SinCos<lanes<double>> sincos_(lanes<double> a) { return {sin_(a), cos_(a)}; }

#define GRID_SIMD_ATAN2(S)                                                   \
  inline vec<S> atan2_(vec<S> y, vec<S> x) {                                 \
    vec<S> r;                                                                \
    for (int k = 0; k < simd_width<S>(); ++k) r[k] = atan2_(y[k], x[k]);     \
    return r;                                                                \
  }                                                                          \
  inline lanes<S> atan2_(lanes<S> y, lanes<S> x) {                           \
    return lanes<S>::of(atan2_(y.v, x.v));                                   \
  }
GRID_SIMD_ATAN2(float)
GRID_SIMD_ATAN2(double)
#undef GRID_SIMD_ATAN2

template <>
inline constexpr int lanes_per_value<vec<float>>() { return simd_width<float>(); }
template <>
inline constexpr int lanes_per_value<vec<double>>() { return simd_width<double>(); }
#define GRID_SIMD_STORE_LANES(S)                                                 \
  inline void store_lanes(vec<S>& x, vec<S> v, unsigned group) {                 \
    if (group == (1u << simd_width<S>()) - 1u) {                                 \
      x = v;                                                                     \
      return;                                                                    \
    }                                                                            \
    for (int j = 0; j < simd_width<S>(); ++j)                                    \
      if (group >> j & 1u) x[j] = v[j];                                          \
  }
GRID_SIMD_STORE_LANES(float)
GRID_SIMD_STORE_LANES(double)
#undef GRID_SIMD_STORE_LANES
inline void set_lane(vec<float>& x, int j, float value) { x[j] = value; }
inline void set_lane(vec<double>& x, int j, double value) { x[j] = value; }
template <typename S>
inline void set_lane(lanes<S>& x, int j, S value) { x.v[j] = value; }
inline float get_lane(const vec<float>& x, int j) { return x[j]; }
inline double get_lane(const vec<double>& x, int j) { return x[j]; }
template <typename S>
inline S get_lane(const lanes<S>& x, int j) { return x.v[j]; }

/// dst[k] lane j = src[(first + j) * width + k]; lanes at or past `count` repeat the last
/// item of the tile. A NULL `src` (an absent optional input) leaves `dst` untouched and
/// returns NULL, so the item function reads zeros.
template <typename V, typename S>
inline const V* load_tile(const S* src, int width, int first, int count, V* dst) {
  if (src == nullptr) return nullptr;
  constexpr int W = simd_width<S>();
  for (int j = 0; j < W; ++j) {
    const S* row = src + (size_t)(first + (j < count ? j : count - 1)) * (size_t)width;
    for (int k = 0; k < width; ++k) set_lane(dst[k], j, row[k]);
  }
  return dst;
}

/// dst[(first + j) * width + k] = src[k] lane j, for the `count` valid lanes: one pass
/// over `src` (a wide row, e.g. second-order blocks of 23,328 vectors, read once rather
/// than once per lane), each vector's lanes to the `count` rows.
template <typename V, typename S>
inline void store_tile(const V* src, int width, int first, int count, S* dst) {
  S* const rows = dst + (size_t)first * (size_t)width;
  for (int k = 0; k < width; ++k) {
    const V x = src[k];
    for (int j = 0; j < count; ++j) rows[(size_t)j * (size_t)width + k] = get_lane(x, j);
  }
}

/// A tile's output row on the heap, for rows too wide for a worker thread's stack (g1's
/// second-order blocks: 171,500 vectors, 5.5 MB); new[] honours the vector's alignment.
template <typename V>
struct heap_row {
  V* p;
  explicit heap_row(int n) : p(new V[n]) {}
  ~heap_row() { delete[] p; }
  heap_row(const heap_row&) = delete;
  heap_row& operator=(const heap_row&) = delete;
};

/// Host threads for `tiles` tiles of `ops` operations each: `requested` (> 0, at most one
/// per tile), or OpenMP's default (omp_get_max_threads(), which honours OMP_NUM_THREADS)
/// reduced so that each thread gets ~20 us of work: small batches stay on the calling
/// thread and pay no parallel region.
inline int host_threads(int requested, int tiles, long ops_per_tile) {
#if defined(_OPENMP)
  if (requested > 0) return requested < tiles ? requested : tiles;
  int threads = omp_get_max_threads();
  const long work_ns = (long)tiles * (ops_per_tile / 2 + 1);  // ~2 vector ops per ns
  const long useful = work_ns / 20000;
  if (useful < threads) threads = useful < 1 ? 1 : (int)useful;
  return threads > tiles ? tiles : threads;
#else
  (void)requested;
  (void)tiles;
  (void)ops_per_tile;
  return 1;
#endif
}

}  // namespace grid
#endif
