/* grid/spatial.h: spatial algebra for the block and warp strategies.
 *
 * Conventions (Pinocchio's): spatial vectors [linear; angular]; a compact transform
 * X[12] is a placement (R, p), R row-major in X[0..8], p in X[9..11], with
 * x_parent = R x_child + p. As a motion transform it maps parent coordinates to child
 * ones (Featherstone's Xup, Pinocchio's act_inv); its transpose maps child forces to the
 * parent. A rigid-body inertia I[10] is Pinocchio's dynamic-parameter vector about the
 * frame origin [m, h = m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]. 6x6 matrices are row-major.
 */
namespace grid {

GRID_INLINE float sqrt_(float x) { return sqrtf(x); }
GRID_INLINE double sqrt_(double x) { return sqrt(x); }
GRID_INLINE double sin_(double x) { return sin(x); }
GRID_INLINE double cos_(double x) { return cos(x); }

/// The sine and cosine of one angle: what a joint transform reads (the generated passes
/// call `sincos_` once per angle where they need both).
template <typename T>
struct SinCos {
  T s, c;
};

#if GRID_IS_CUDA
/// `sincos_` of a wide argument (|x| >= 105615, inf, NaN): libdevice's, out of line, so
/// that the inline form below carries none of its reduction tables or branches.
template <typename F>
__device__ __noinline__ SinCos<F> sincos_wide(F x) {
  SinCos<F> r;
  sincosf(x, &r.s, &r.c);
  return r;
}
#endif

/// On the GPU in float: x = k pi/2 + r by a three-part Cody-Waite reduction (pi/2 split
/// so that each k * part is exact), then the Taylor polynomials of sin (to r^9) and cos (to
/// r^10) on |r| <= pi/4, whose truncation errors (2e-9, 1e-10) are below float's rounding;
/// within 1.5 ulp of the true values (CUDA's sinf: 2 ulp), one branch per angle against
/// two inlined library reductions with their slow paths. Elsewhere: the library's.
GRID_INLINE SinCos<float> sincos_(float x) {
#if defined(__CUDA_ARCH__)
  if (!(fabsf(x) < 105615.0f)) return sincos_wide(x);
  const float k = rintf(x * 0.636619772367581343f);
  float r = fmaf(k, -1.57079625129699707031f, x);
  r = fmaf(k, -7.54978941586159635335e-08f, r);
  r = fmaf(k, -5.39030252995776476554e-15f, r);
  const float r2 = r * r;
  float ps = fmaf(r2, 2.75573192e-6f, -1.98412698e-4f);
  ps = fmaf(r2, ps, 8.33333333e-3f);
  ps = fmaf(r2, ps, -1.66666667e-1f);
  const float sr = fmaf(r * r2, ps, r);
  float pc = fmaf(r2, -2.75573192e-7f, 2.48015873e-5f);
  pc = fmaf(r2, pc, -1.38888889e-3f);
  pc = fmaf(r2, pc, 4.16666667e-2f);
  pc = fmaf(r2, pc, -0.5f);
  const float cr = fmaf(r2, pc, 1.0f);
  const int quadrant = (int)k;  // sin(x) = +-sr or +-cr by the quadrant of k
  const float a = (quadrant & 1) ? cr : sr, b = (quadrant & 1) ? sr : cr;
  return {(quadrant & 2) ? -a : a, ((quadrant + 1) & 2) ? -b : b};
#else
  return {sinf(x), cosf(x)};
#endif
}
GRID_INLINE SinCos<double> sincos_(double x) { return {sin(x), cos(x)}; }
#if defined(__CUDA_ARCH__)
GRID_INLINE float sin_(float x) { return sincos_(x).s; }
GRID_INLINE float cos_(float x) { return sincos_(x).c; }
#else
GRID_INLINE float sin_(float x) { return sinf(x); }
GRID_INLINE float cos_(float x) { return cosf(x); }
#endif
GRID_INLINE float atan2_(float y, float x) { return atan2f(y, x); }
GRID_INLINE double atan2_(double y, double x) { return atan2(y, x); }
GRID_INLINE float tanh_(float x) { return tanhf(x); }
GRID_INLINE double tanh_(double x) { return tanh(x); }
/// sign(x) with sign(0) = 0: the Coulomb friction direction (joint dynamics).
GRID_INLINE float sign_(float x) { return float((x > 0.0f) - (x < 0.0f)); }
GRID_INLINE double sign_(double x) { return double((x > 0.0) - (x < 0.0)); }

/// out = a x b (3-vectors).
template <typename T>
GRID_INLINE void cross3(const T* a, const T* b, T* out) {
  out[0] = a[1] * b[2] - a[2] * b[1];
  out[1] = a[2] * b[0] - a[0] * b[2];
  out[2] = a[0] * b[1] - a[1] * b[0];
}

/// out = R v, out = R^T v (R row-major 3x3).
template <typename T>
GRID_INLINE void rot(const T* R, const T* v, T* out) {
  for (int i = 0; i < 3; ++i) out[i] = R[3 * i] * v[0] + R[3 * i + 1] * v[1] + R[3 * i + 2] * v[2];
}
template <typename T>
GRID_INLINE void rot_t(const T* R, const T* v, T* out) {
  for (int i = 0; i < 3; ++i) out[i] = R[i] * v[0] + R[3 + i] * v[1] + R[6 + i] * v[2];
}

/// Rotation of a quaternion [x, y, z, w], normalised first (free-flyer configuration).
template <typename T>
GRID_INLINE void quat_to_rotation(const T* quat, T* R) {
  const T n = T(1) / sqrt_(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] +
                           quat[3] * quat[3]);
  const T x = quat[0] * n, y = quat[1] * n, z = quat[2] * n, w = quat[3] * n;
  R[0] = T(1) - T(2) * (y * y + z * z);
  R[1] = T(2) * (x * y - z * w);
  R[2] = T(2) * (x * z + y * w);
  R[3] = T(2) * (x * y + z * w);
  R[4] = T(1) - T(2) * (x * x + z * z);
  R[5] = T(2) * (y * z - x * w);
  R[6] = T(2) * (x * z - y * w);
  R[7] = T(2) * (y * z + x * w);
  R[8] = T(1) - T(2) * (x * x + y * y);
}

/// out = a * b as placements: R = Ra Rb, p = Ra pb + pa (out must not alias a or b).
template <typename T>
GRID_INLINE void compose(const T* a, const T* b, T* out) {
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      out[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
    }
  }
  rot(a, b + 9, out + 9);
  for (int i = 0; i < 3; ++i) out[9 + i] += a[9 + i];
}

/// Motion parent -> child: out = [R^T (m_lin - p x m_ang); R^T m_ang].
template <typename T>
GRID_INLINE void motion_to_child(const T* X, const T* m, T* out) {
  T t[3];
  cross3(X + 9, m + 3, t);
  for (int i = 0; i < 3; ++i) t[i] = m[i] - t[i];
  rot_t(X, t, out);
  rot_t(X, m + 3, out + 3);
}

/// Force child -> parent: out = [R f_lin; R f_ang + p x (R f_lin)].
template <typename T>
GRID_INLINE void force_to_parent(const T* X, const T* f, T* out) {
  T t[3];
  rot(X, f, out);
  rot(X, f + 3, out + 3);
  cross3(X + 9, out, t);
  for (int i = 0; i < 3; ++i) out[3 + i] += t[i];
}

/// Motion child -> parent (Pinocchio's act): out = [R m_lin + p x (R m_ang); R m_ang].
template <typename T>
GRID_INLINE void motion_to_parent(const T* X, const T* m, T* out) {
  T t[3];
  rot(X, m, out);
  rot(X, m + 3, out + 3);
  cross3(X + 9, out + 3, t);
  for (int i = 0; i < 3; ++i) out[i] += t[i];
}

/// out += v x m (motion cross product): [w x m_lin + v_lin x m_ang; w x m_ang].
template <typename T>
GRID_INLINE void motion_cross_add(const T* v, const T* m, T* out) {
  T a[3], b[3];
  cross3(v + 3, m, a);
  cross3(v, m + 3, b);
  for (int i = 0; i < 3; ++i) out[i] += a[i] + b[i];
  cross3(v + 3, m + 3, a);
  for (int i = 0; i < 3; ++i) out[3 + i] += a[i];
}

/// out += v x* f (force cross product): [w x f_lin; v_lin x f_lin + w x f_ang].
template <typename T>
GRID_INLINE void force_cross_add(const T* v, const T* f, T* out) {
  T a[3], b[3];
  cross3(v + 3, f, a);
  for (int i = 0; i < 3; ++i) out[i] += a[i];
  cross3(v, f, a);
  cross3(v + 3, f + 3, b);
  for (int i = 0; i < 3; ++i) out[3 + i] += a[i] + b[i];
}

/// out = I v for a rigid-body inertia: [m v_lin - h x w; h x v_lin + I0 w].
template <typename T>
GRID_INLINE void inertia_apply(const T* I, const T* v, T* out) {
  T a[3];
  const T* w = v + 3;
  cross3(I + 1, w, a);
  for (int i = 0; i < 3; ++i) out[i] = I[0] * v[i] - a[i];
  cross3(I + 1, v, a);
  out[3] = a[0] + I[4] * w[0] + I[5] * w[1] + I[7] * w[2];
  out[4] = a[1] + I[5] * w[0] + I[6] * w[1] + I[8] * w[2];
  out[5] = a[2] + I[7] * w[0] + I[8] * w[1] + I[9] * w[2];
}

/// A child-frame rigid inertia expressed in the parent frame (out must not alias I):
/// h' = R h + m p, I0' = R I0 R^T - (p g^T + g p^T) + 2 (g.p) 1 - m (p p^T - |p|^2 1), g = R h.
template <typename T>
GRID_INLINE void inertia_to_parent(const T* X, const T* I, T* out) {
  const T* R = X;
  const T* p = X + 9;
  const T m = I[0];
  T g[3];
  rot(R, I + 1, g);
  const T J[9] = {I[4], I[5], I[7], I[5], I[6], I[8], I[7], I[8], I[9]};
  T RJ[9], K[9];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      RJ[3 * i + j] = R[3 * i] * J[j] + R[3 * i + 1] * J[3 + j] + R[3 * i + 2] * J[6 + j];
  const T gp = g[0] * p[0] + g[1] * p[1] + g[2] * p[2];
  const T pp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      const T diag = (i == j) ? T(2) * gp + m * pp : T(0);
      const T rjr = RJ[3 * i] * R[3 * j] + RJ[3 * i + 1] * R[3 * j + 1] +
                    RJ[3 * i + 2] * R[3 * j + 2];
      K[3 * i + j] = rjr - (p[i] * g[j] + g[i] * p[j]) - m * p[i] * p[j] + diag;
    }
  }
  out[0] = m;
  for (int i = 0; i < 3; ++i) out[1 + i] = g[i] + m * p[i];
  out[4] = K[0]; out[5] = K[1]; out[6] = K[4]; out[7] = K[2]; out[8] = K[5]; out[9] = K[8];
}

/// The 6x6 matrix of a rigid-body inertia: [[m 1, -[h]], [[h], I0]].
template <typename T>
GRID_INLINE void inertia_to_matrix(const T* I, T* M) {
  const T m = I[0], hx = I[1], hy = I[2], hz = I[3];
  const T rows[36] = {m, 0, 0, 0, hz, -hy,
                      0, m, 0, -hz, 0, hx,
                      0, 0, m, hy, -hx, 0,
                      0, -hz, hy, I[4], I[5], I[7],
                      hz, 0, -hx, I[5], I[6], I[8],
                      -hy, hx, 0, I[7], I[8], I[9]};
  for (int k = 0; k < 36; ++k) M[k] = rows[k];
}

/// The 6x6 motion transform parent -> child of a compact X: [[R^T, -R^T [p]], [0, R^T]].
template <typename T>
GRID_INLINE void motion_matrix(const T* X, T* M) {
  const T* R = X;
  const T* p = X + 9;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      // (R^T [p])_ij = sum_k R_ki [p]_kj, with [p] the cross-product matrix of p.
      const T px[3] = {j == 0 ? T(0) : (j == 1 ? -p[2] : p[1]),
                       j == 0 ? p[2] : (j == 1 ? T(0) : -p[0]),
                       j == 0 ? -p[1] : (j == 1 ? p[0] : T(0))};
      M[6 * i + j] = R[3 * j + i];
      M[6 * i + 3 + j] = -(R[i] * px[0] + R[3 + i] * px[1] + R[6 + i] * px[2]);
      M[6 * (3 + i) + j] = T(0);
      M[6 * (3 + i) + 3 + j] = R[3 * j + i];
    }
  }
}

/// out = X^T A X for the motion transform of a compact X (carries a child-frame
/// articulated inertia to the parent frame).
template <typename T>
GRID_INLINE void congruence_to_parent(const T* X, const T* A, T* out) {
  T M[36], AM[36];
  motion_matrix(X, M);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      T acc = T(0);
      for (int k = 0; k < 6; ++k) acc += A[6 * i + k] * M[6 * k + j];
      AM[6 * i + j] = acc;
    }
  }
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      T acc = T(0);
      for (int k = 0; k < 6; ++k) acc += M[6 * k + i] * AM[6 * k + j];
      out[6 * i + j] = acc;
    }
  }
}

/// out = A v (6x6 row-major times 6-vector).
template <typename T>
GRID_INLINE void mat6_vec(const T* A, const T* v, T* out) {
  for (int i = 0; i < 6; ++i) {
    T acc = T(0);
    for (int k = 0; k < 6; ++k) acc += A[6 * i + k] * v[k];
    out[i] = acc;
  }
}

/// Solve A x = b for a symmetric positive-definite 6x6 A by Cholesky (x may alias b).
template <typename T>
GRID_INLINE void spd_solve6(const T* A, const T* b, T* x) {
  T L[36], y[6];
  for (int j = 0; j < 6; ++j) {
    T d = A[6 * j + j];
    for (int k = 0; k < j; ++k) d -= L[6 * j + k] * L[6 * j + k];
    L[6 * j + j] = sqrt_(d);
    const T inv = T(1) / L[6 * j + j];
    for (int i = j + 1; i < 6; ++i) {
      T e = A[6 * i + j];
      for (int k = 0; k < j; ++k) e -= L[6 * i + k] * L[6 * j + k];
      L[6 * i + j] = e * inv;
    }
  }
  for (int i = 0; i < 6; ++i) {
    T e = b[i];
    for (int k = 0; k < i; ++k) e -= L[6 * i + k] * y[k];
    y[i] = e / L[6 * i + i];
  }
  for (int i = 5; i >= 0; --i) {
    T e = y[i];
    for (int k = i + 1; k < 6; ++k) e -= L[6 * k + i] * x[k];
    x[i] = e / L[6 * i + i];
  }
}

/// Roll, pitch, yaw of R = Rz(yaw) Ry(pitch) Rx(roll), pitch in [-pi/2, pi/2].
template <typename T>
GRID_INLINE void rotation_to_rpy(const T* R, T* rpy) {
  rpy[0] = atan2_(R[7], R[8]);
  rpy[1] = atan2_(-R[6], sqrt_(R[0] * R[0] + R[3] * R[3]));
  rpy[2] = atan2_(R[3], R[0]);
}

}  // namespace grid
