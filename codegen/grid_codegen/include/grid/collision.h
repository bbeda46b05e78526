/* grid/collision.h: the loop form of the collision kernels (docs/collision.md).
 *
 * Inlined into grid.cuh only when the robot is built with collision=True, after the
 * other headers, followed by the robot's `CollisionTables` (grid_codegen.collision.emit).
 * Every routine takes the tables as a template argument `Tab` (its counts are static
 * constexpr members) and the collision kinematics `K` of one item:
 *   K[12 p .. 12 p + 11]       pose p: R (row-major, body -> world), then its origin
 *                              (p = body index; p = kNb is the world, the identity);
 *   K[12 kPoses + 6 j + 0..5]  world motion-subspace column of dof j, [v; w] about the
 *                              world origin (a point x fixed to the body moves v + w x x).
 * The primitives are spheres and capsules (segments with a radius); their closest points
 * follow grid_codegen.collision.primitives candidate by candidate, so that the float64
 * reference and these kernels pick the same active pair (strict `<`: the first wins).
 *
 * T is the per-item scalar: float or double on the GPU and in the device API, a vector of
 * items (grid::vec<S>) in the CPU build's thread kernels, where `cond ? x : y` selects per
 * lane; the code is branch-free in T for that reason. S is the table scalar.
 */
namespace grid {

/// A squared distance no primitive pair reaches (the initial "best").
constexpr double kCollisionFar = 1e30;
/// sin^2 of the angle under which two segments count as parallel (no interior candidate).
constexpr double kCollisionParallel = 1e-10;

/// Closest points nearer than this (m; 64 ulp of 1 m in S) count as coincident: the pair
/// then has no direction and its gradient is zero (crossing segments, a centre on an
/// axis: the distance has a kink there, and the rounding noise of x1 - x2 would
/// otherwise become a direction).
template <typename S>
struct collision_coincident;
template <>
struct collision_coincident<float> {
  static constexpr double value = 64 * 1.1920928955078125e-07;
};
template <>
struct collision_coincident<double> {
  static constexpr double value = 64 * 2.220446049250313e-16;
};

template <typename T, typename S>
GRID_INLINE T collision_dot(const T* a, const T* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

template <typename T, typename S>
GRID_INLINE T collision_clamp01(T x) {
  const T zero = T{} + S(0), one = T{} + S(1);
  return x < zero ? zero : (x > one ? one : x);
}

/// x = a + t (b - a), t in [0, 1]: the point of segment [a, b] closest to p.
template <typename T, typename S>
GRID_INLINE void collision_segment_point(const T* a, const T* b, const T* p, T* x) {
  const T d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const T ap[3] = {p[0] - a[0], p[1] - a[1], p[2] - a[2]};
  const T dd = collision_dot<T, S>(d, d);
  const T zero = T{} + S(0);
  const T t = collision_clamp01<T, S>(collision_dot<T, S>(ap, d) /
                                      (dd > zero ? dd : T{} + S(1)));
  for (int k = 0; k < 3; ++k) x[k] = a[k] + t * d[k];
}

/// Replace (x1, x2, e2) by (y1, y2, |y1 - y2|^2) where that is strictly smaller.
template <typename T, typename S>
GRID_INLINE void collision_keep_closer(const T* y1, const T* y2, T* x1, T* x2, T& e2) {
  const T d[3] = {y1[0] - y2[0], y1[1] - y2[1], y1[2] - y2[2]};
  const T n2 = collision_dot<T, S>(d, d);
  const auto take = n2 < e2;
  e2 = take ? n2 : e2;
  for (int k = 0; k < 3; ++k) {
    x1[k] = take ? y1[k] : x1[k];
    x2[k] = take ? y2[k] : x2[k];
  }
}

/// Closest points x1 of [a1, b1] and x2 of [a2, b2]: the interior stationary point when
/// the segments are not parallel and it lies in [0, 1]^2, else the best of the four end
/// points against the other segment (exact in every case; primitives.py).
template <typename T, typename S>
GRID_INLINE void collision_segment_segment(const T* a1, const T* b1, const T* a2, const T* b2,
                                           T* x1, T* x2) {
  const T d1[3] = {b1[0] - a1[0], b1[1] - a1[1], b1[2] - a1[2]};
  const T d2[3] = {b2[0] - a2[0], b2[1] - a2[1], b2[2] - a2[2]};
  const T r[3] = {a1[0] - a2[0], a1[1] - a2[1], a1[2] - a2[2]};
  const T a = collision_dot<T, S>(d1, d1), e = collision_dot<T, S>(d2, d2);
  const T b = collision_dot<T, S>(d1, d2);
  const T c = collision_dot<T, S>(d1, r), f = collision_dot<T, S>(d2, r);
  const T denom = a * e - b * b;
  const T zero = T{} + S(0), one = T{} + S(1);
  const auto skew = denom > S(kCollisionParallel) * a * e;
  const T safe = skew ? denom : one;
  const T s = (b * f - c * e) / safe, t = (a * f - b * c) / safe;
  const auto inside = skew & (s >= zero) & (s <= one) & (t >= zero) & (t <= one);
  T e2;
  for (int k = 0; k < 3; ++k) {
    x1[k] = a1[k] + s * d1[k];
    x2[k] = a2[k] + t * d2[k];
  }
  {
    const T d[3] = {x1[0] - x2[0], x1[1] - x2[1], x1[2] - x2[2]};
    e2 = inside ? collision_dot<T, S>(d, d) : T{} + S(kCollisionFar);
  }
  T y[3];
  collision_segment_point<T, S>(a2, b2, a1, y);
  collision_keep_closer<T, S>(a1, y, x1, x2, e2);
  collision_segment_point<T, S>(a2, b2, b1, y);
  collision_keep_closer<T, S>(b1, y, x1, x2, e2);
  collision_segment_point<T, S>(a1, b1, a2, y);
  collision_keep_closer<T, S>(y, a2, x1, x2, e2);
  collision_segment_point<T, S>(a1, b1, b2, y);
  collision_keep_closer<T, S>(y, b2, x1, x2, e2);
}

/// World positions of every sphere centre (capsule end spheres included): W[3 kSpheres].
template <typename T, typename S, class Tab>
GRID_INLINE void collision_world_points(const Tab& tab, const T* K, T* W) {
  for (int i = 0; i < Tab::kSpheres; ++i) {
    const T* R = K + 12 * tab.sphere_pose[i];
    const double* c = tab.sphere_center + 3 * i;
    for (int k = 0; k < 3; ++k)
      W[3 * i + k] = R[3 * k] * S(c[0]) + R[3 * k + 1] * S(c[1]) + R[3 * k + 2] * S(c[2]) +
                     R[9 + k];
  }
}

/// out[(3 s + k) kNv + j]: d(world centre k of sphere s)/d(tangent j), v_j + w_j x p_s on
/// the dofs that move its body, zero elsewhere.
template <typename T, typename S, class Tab>
GRID_INLINE void collision_sphere_positions_gradient(const Tab& tab, const T* K, T* out) {
  T W[3 * Tab::kSpheres];
  collision_world_points<T, S>(tab, K, W);
  const T* cols = K + 12 * Tab::kPoses;
  for (int i = 0; i < Tab::kSpheres; ++i) {
    const T* x = W + 3 * i;
    const unsigned char* on = tab.support + tab.sphere_pose[i] * Tab::kNv;
    T* o = out + 3 * i * Tab::kNv;
    for (int j = 0; j < Tab::kNv; ++j) {
      const T* v = cols + 6 * j;
      const T zero = T{} + S(0);
      o[j] = on[j] ? v[0] + v[4] * x[2] - v[5] * x[1] : zero;
      o[Tab::kNv + j] = on[j] ? v[1] + v[5] * x[0] - v[3] * x[2] : zero;
      o[2 * Tab::kNv + j] = on[j] ? v[2] + v[3] * x[1] - v[4] * x[0] : zero;
    }
  }
}

/// Candidate (y1, y2) of radii sum `radii`: kept when its signed distance is below `best`.
template <typename T, typename S, bool kPoints>
GRID_INLINE void collision_candidate(const T* y1, const T* y2, S radii, T& best, T* x1,
                                     T* x2) {
  const T d[3] = {y1[0] - y2[0], y1[1] - y2[1], y1[2] - y2[2]};
  const T dist = sqrt_(collision_dot<T, S>(d, d)) - radii;
  const auto take = dist < best;
  best = take ? dist : best;
  if (kPoints) {
    for (int k = 0; k < 3; ++k) {
      x1[k] = take ? y1[k] : x1[k];
      x2[k] = take ? y2[k] : x2[k];
    }
  }
}

/// The signed distance of links la and lb (indices of the tables' links) and, with
/// kPoints, the closest points of the active candidate (x1 on la, x2 on lb).
template <typename T, typename S, bool kPoints, class Tab>
GRID_INLINE void collision_link_pair(const Tab& tab, const T* W, int la, int lb, T& best,
                                     T* x1, T* x2) {
  best = T{} + S(kCollisionFar);
  const int s0 = tab.link_spheres[2 * la], s1 = tab.link_spheres[2 * la + 1];
  const int t0 = tab.link_spheres[2 * lb], t1 = tab.link_spheres[2 * lb + 1];
  const int c0 = tab.link_capsules[2 * la], c1 = tab.link_capsules[2 * la + 1];
  const int e0 = tab.link_capsules[2 * lb], e1 = tab.link_capsules[2 * lb + 1];
  for (int i = s0; i < s1; ++i)
    for (int j = t0; j < t1; ++j)
      collision_candidate<T, S, kPoints>(W + 3 * i, W + 3 * j,
                                         S(tab.sphere_radius[i] + tab.sphere_radius[j]),
                                         best, x1, x2);
  T y[3], z[3];
  for (int c = c0; c < c1; ++c) {
    const T* a = W + 3 * tab.capsule_ends[2 * c];
    const T* b = W + 3 * tab.capsule_ends[2 * c + 1];
    for (int j = t0; j < t1; ++j) {
      collision_segment_point<T, S>(a, b, W + 3 * j, y);
      collision_candidate<T, S, kPoints>(y, W + 3 * j,
                                         S(tab.capsule_radius[c] + tab.sphere_radius[j]),
                                         best, x1, x2);
    }
  }
  for (int i = s0; i < s1; ++i)
    for (int c = e0; c < e1; ++c) {
      collision_segment_point<T, S>(W + 3 * tab.capsule_ends[2 * c],
                                    W + 3 * tab.capsule_ends[2 * c + 1], W + 3 * i, y);
      collision_candidate<T, S, kPoints>(W + 3 * i, y,
                                         S(tab.sphere_radius[i] + tab.capsule_radius[c]),
                                         best, x1, x2);
    }
  for (int c = c0; c < c1; ++c)
    for (int g = e0; g < e1; ++g) {
      collision_segment_segment<T, S>(
          W + 3 * tab.capsule_ends[2 * c], W + 3 * tab.capsule_ends[2 * c + 1],
          W + 3 * tab.capsule_ends[2 * g], W + 3 * tab.capsule_ends[2 * g + 1], y, z);
      collision_candidate<T, S, kPoints>(y, z, S(tab.capsule_radius[c] +
                                                 tab.capsule_radius[g]), best, x1, x2);
    }
}

/// out[p]: the signed distance of every checked link pair (Tab::kPairs).
template <typename T, typename S, class Tab>
GRID_INLINE void collision_self_distance(const Tab& tab, const T* K, T* out) {
  T W[3 * Tab::kSpheres];
  collision_world_points<T, S>(tab, K, W);
  for (int p = 0; p < Tab::kPairs; ++p)
    collision_link_pair<T, S, false>(tab, W, tab.pair_links[2 * p], tab.pair_links[2 * p + 1],
                                     out[p], nullptr, nullptr);
}

/// d = n . (v_j + w_j x x) for the dofs moving exactly one of the two poses: +n on pose
/// pa's side, -n on pb's (a dof moving both moves the pair rigidly: exactly zero); n the
/// unit vector from x2 to x1, zero when they coincide (collision_coincident).
template <typename T, typename S, class Tab>
GRID_INLINE void collision_pair_gradient(const Tab& tab, const T* K, int pa, int pb,
                                         const T* x1, const T* x2, T* out) {
  const T diff[3] = {x1[0] - x2[0], x1[1] - x2[1], x1[2] - x2[2]};
  const T n2 = collision_dot<T, S>(diff, diff), one = T{} + S(1);
  const double eps = collision_coincident<S>::value;
  const auto apart = n2 > S(eps * eps);
  const T inv = apart ? one / sqrt_(apart ? n2 : one) : T{} + S(0);
  const T n[3] = {diff[0] * inv, diff[1] * inv, diff[2] * inv};
  const T* cols = K + 12 * Tab::kPoses;
  for (int j = 0; j < Tab::kNv; ++j) {
    const bool on_a = tab.support[pa * Tab::kNv + j] != 0;
    const bool on_b = tab.support[pb * Tab::kNv + j] != 0;
    if (on_a == on_b) {
      out[j] = T{} + S(0);
      continue;
    }
    const T* x = on_a ? x1 : x2;
    const T* v = cols + 6 * j;
    const T u[3] = {v[0] + v[4] * x[2] - v[5] * x[1], v[1] + v[5] * x[0] - v[3] * x[2],
                    v[2] + v[3] * x[1] - v[4] * x[0]};
    const T g = collision_dot<T, S>(n, u);
    out[j] = on_a ? g : -g;
  }
}

/// out[p * kNv + j]: d(distance of pair p)/d(tangent j), the active candidate's gradient.
template <typename T, typename S, class Tab>
GRID_INLINE void collision_self_distance_gradient(const Tab& tab, const T* K, T* out) {
  T W[3 * Tab::kSpheres];
  collision_world_points<T, S>(tab, K, W);
  for (int p = 0; p < Tab::kPairs; ++p) {
    const int la = tab.pair_links[2 * p], lb = tab.pair_links[2 * p + 1];
    T best, x1[3], x2[3];
    collision_link_pair<T, S, true>(tab, W, la, lb, best, x1, x2);
    collision_pair_gradient<T, S>(tab, K, tab.link_pose[la], tab.link_pose[lb], x1, x2,
                                  out + p * Tab::kNv);
  }
}

/// Per obstacle sphere o (centre centers[3 o ..], radius radii[o]; m of them): dist[o],
/// the signed distance to the closest robot primitive (spheres of their own, then
/// capsules; the first wins a tie), and grad[o * kNv + j] its gradient (n . J(x), n from
/// the obstacle to the closest robot point x); either output may be NULL. One item; T a
/// scalar (the device API's one-thread form).
template <typename T, typename S, class Tab>
GRID_INLINE void collision_world_distance(const Tab& tab, const T* K, int m, const T* centers,
                                          const T* radii, T* dist, T* grad) {
  T W[3 * Tab::kSpheres];
  collision_world_points<T, S>(tab, K, W);
  const int world = Tab::kPoses - 1;
  for (int o = 0; o < m; ++o) {
    const T* c = centers + 3 * o;
    T best = T(kCollisionFar), x[3] = {T(0), T(0), T(0)};
    int pose = world;
    for (int l = 0; l < Tab::kLinks; ++l) {
      for (int i = tab.link_spheres[2 * l]; i < tab.link_spheres[2 * l + 1]; ++i) {
        const T d[3] = {W[3 * i] - c[0], W[3 * i + 1] - c[1], W[3 * i + 2] - c[2]};
        const T di = sqrt_(collision_dot<T, S>(d, d)) - T(tab.sphere_radius[i]);
        if (di < best) {
          best = di;
          pose = tab.link_pose[l];
          for (int k = 0; k < 3; ++k) x[k] = W[3 * i + k];
        }
      }
    }
    for (int l = 0; l < Tab::kLinks; ++l) {
      for (int g = tab.link_capsules[2 * l]; g < tab.link_capsules[2 * l + 1]; ++g) {
        T y[3];
        collision_segment_point<T, S>(W + 3 * tab.capsule_ends[2 * g],
                                      W + 3 * tab.capsule_ends[2 * g + 1], c, y);
        const T d[3] = {y[0] - c[0], y[1] - c[1], y[2] - c[2]};
        const T dg = sqrt_(collision_dot<T, S>(d, d)) - T(tab.capsule_radius[g]);
        if (dg < best) {
          best = dg;
          pose = tab.link_pose[l];
          for (int k = 0; k < 3; ++k) x[k] = y[k];
        }
      }
    }
    if (dist != nullptr) dist[o] = best - radii[o];
    if (grad != nullptr)
      collision_pair_gradient<T, S>(tab, K, pose, world, x, c, grad + o * Tab::kNv);
  }
}

}  // namespace grid
