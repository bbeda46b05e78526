/* grid/idsva.h: the backward sweep of IDSVA (second-order inverse dynamics) as loops over
 * the tree, for robots whose unrolled sweep is too much code (symbolic/idsva.py holds the
 * same algorithm, traced; its docstring gives the notation).
 *
 * K (per item, written by the traced forward pass `idsva_forward`): per dof d at 24 d the
 * world-frame S, psid, psidd and psid + phid (6 each); per body b at 24 nv + 52 b its rigid inertia
 * about the world origin (10), its BC term (6x6 row-major) and its net force (6). The
 * sweep turns the bodies' entries into composites in place (a child's added to its parent
 * once the child is done) and writes the four (nv, nv, nv) blocks of idsva_so to out.
 *
 * Tables (per robot): parent[b] (-1 at a root), the dofs dof_start[b] ..
 * dof_start[b] + dof_count[b] - 1 of body b, body_of[d], and in chain[chain_start[b] ..
 * chain_start[b + 1] - 1] the dofs of b and of its ancestors, b's own first.
 *
 * T is a scalar or the CPU build's vector of items (+ - * and T{} only).
 */
namespace grid {

template <typename T>
GRID_INLINE T idsva_dot(const T* a, const T* b) {
  T acc = a[0] * b[0];
  for (int k = 1; k < 6; ++k) acc += a[k] * b[k];
  return acc;
}

/// out = v x* f.
template <typename T>
GRID_INLINE void idsva_fcross(const T* v, const T* f, T* out) {
  for (int k = 0; k < 6; ++k) out[k] = T{};
  force_cross_add(v, f, out);
}

/// out = v x m.
template <typename T>
GRID_INLINE void idsva_mcross(const T* v, const T* m, T* out) {
  for (int k = 0; k < 6; ++k) out[k] = T{};
  motion_cross_add(v, m, out);
}

/// out = A x and out = A^T x (A 6x6 row-major). Not spatial.h's mat6_vec: that one starts
/// from T(0), which the CPU build's plain vectors of items cannot construct.
template <typename T>
GRID_INLINE void idsva_mat(const T* A, const T* x, T* out) {
  for (int r = 0; r < 6; ++r) out[r] = idsva_dot(A + 6 * r, x);
}
template <typename T>
GRID_INLINE void idsva_mat_t(const T* A, const T* x, T* out) {
  for (int c = 0; c < 6; ++c) {
    T acc = A[c] * x[0];
    for (int r = 1; r < 6; ++r) acc += A[6 * r + c] * x[r];
    out[c] = acc;
  }
}

/// out = var(v) x = v x* (Y x) - Y (v x x), the rate of the rigid inertia Y along v applied
/// to x, given Yx = Y x and m = v x x (the turn shares them between its vectors).
template <typename T>
GRID_INLINE void idsva_var_shared(const T* Y, const T* v, const T* Yx, const T* m, T* out) {
  T t[6];
  idsva_fcross(v, Yx, out);
  inertia_apply(Y, m, t);
  for (int k = 0; k < 6; ++k) out[k] -= t[k];
}

/// What every pair of column i reads (`ci`: its S, psid, psidd, psid + phid; Y, BC, F:
/// its body's composites) into P: IC S, IC psid, f5 = BC psid + S x* F + IC psidd,
/// f7 = BC S + IC (psid + phid), BC^T S (6 each).
template <typename T>
GRID_INLINE void idsva_column_terms(const T* Y, const T* BC, const T* F, const T* ci, T* P) {
  T t[6];
  inertia_apply(Y, ci, P);
  inertia_apply(Y, ci + 6, P + 6);
  idsva_mat(BC, ci + 6, P + 12);
  force_cross_add(ci, F, P + 12);
  inertia_apply(Y, ci + 12, t);
  for (int k = 0; k < 6; ++k) P[12 + k] += t[k];
  idsva_mat(BC, ci, P + 18);
  inertia_apply(Y, ci + 18, t);
  for (int k = 0; k < 6; ++k) P[18 + k] += t[k];
  idsva_mat_t(BC, ci, P + 24);
}

/// The vectors of the turn (column i, ancestor column j) into U, 6 each, in the order
/// of symbolic/idsva_gather.py's TURN_VECTORS: u9, u58 = u5 + u8 (= u8 - u12), u1, u2,
/// u3, u6, u7, u4. `ci`, `cj`: the columns' motions; P: idsva_column_terms of i. With
/// var(v) x = v x* (Y x) - Y (v x x) and r3 x = var(psid_i) x + x x* (IC psid_i)
/// + S_i x* (BC x) - BC (S_i x x):
///   u2 = var(S_i) S_j,  u9 = S_j x* IC S_i,  u4 = u9 + S_i x* (Y S_j),
///   u58 = S_j x* (BC^T S_i) + psid_j x* IC S_i - var(S_i) psid_j,
///   u6 = var(S_i) psid_j + psid_j x* IC S_i + S_j x* f7,
///   u1 = var(psid_i) S_j - S_j x* IC psid_i - BC^T (S_i x S_j) + S_i x* (BC^T S_j),
///   u7 = r3 S_j + var(S_i) (psid_j + phid_j),  u3 = r3 psid_j + var(S_i) psidd_j + S_j x* f5.
/// The products they share (Y S_j, S_i x S_j, var(psid_i) S_j, S_j x* IC psid_i) are
/// formed once, and U is written only once a vector is final: written through, U (shared
/// memory on the GPU) would make nvcc reload every input after each store (iiwa14's tile
/// form: 2,392 SASS instructions a turn, 1,576 this way, no spills at 128 registers).
template <typename T>
GRID_INLINE void idsva_turn(const T* Y, const T* BC, const T* ci, const T* P, const T* cj,
                            T* GRID_RESTRICT U) {
  const T* const ICS = P;
  const T* const ICpsid = P + 6;
  const T* const Si = ci;
  const T* const psid_i = ci + 6;
  const T* const Sj = cj;
  const T* const psj = cj + 6;
  T SixSj[6], YSj[6], a[6], b[6], t[6];
  idsva_mcross(Si, Sj, SixSj);
  inertia_apply(Y, Sj, YSj);
  idsva_var_shared(Y, Si, YSj, SixSj, a);  // u2
  for (int k = 0; k < 6; ++k) U[18 + k] = a[k];
  idsva_fcross(Sj, ICS, b);  // u9
  for (int k = 0; k < 6; ++k) U[k] = b[k];
  force_cross_add(Si, YSj, b);  // u4
  for (int k = 0; k < 6; ++k) U[42 + k] = b[k];
  {
    T m[6], varS_psj[6], psj_ICS[6];
    idsva_mcross(Si, psj, m);
    inertia_apply(Y, psj, t);
    idsva_var_shared(Y, Si, t, m, varS_psj);
    idsva_fcross(psj, ICS, psj_ICS);
    idsva_fcross(Sj, P + 24, a);  // u58
    idsva_fcross(Sj, P + 18, b);  // u6
    for (int k = 0; k < 6; ++k) {
      a[k] += psj_ICS[k] - varS_psj[k];
      b[k] += varS_psj[k] + psj_ICS[k];
    }
    for (int k = 0; k < 6; ++k) U[6 + k] = a[k];
    for (int k = 0; k < 6; ++k) U[30 + k] = b[k];
  }
  T var_psid_Sj[6], Sj_ICpsid[6];
  idsva_mcross(psid_i, Sj, t);
  idsva_var_shared(Y, psid_i, YSj, t, var_psid_Sj);
  idsva_fcross(Sj, ICpsid, Sj_ICpsid);
  for (int k = 0; k < 6; ++k) a[k] = var_psid_Sj[k] - Sj_ICpsid[k];  // u1
  idsva_mat_t(BC, SixSj, t);
  for (int k = 0; k < 6; ++k) a[k] -= t[k];
  idsva_mat_t(BC, Sj, t);
  force_cross_add(Si, t, a);
  for (int k = 0; k < 6; ++k) U[12 + k] = a[k];
  for (int k = 0; k < 6; ++k) a[k] = var_psid_Sj[k] + Sj_ICpsid[k];  // u7
  idsva_mat(BC, Sj, t);
  force_cross_add(Si, t, a);
  idsva_mat(BC, SixSj, t);
  for (int k = 0; k < 6; ++k) a[k] -= t[k];
  {
    T m[6], Yx[6];
    idsva_mcross(Si, cj + 18, m);
    inertia_apply(Y, cj + 18, Yx);
    idsva_var_shared(Y, Si, Yx, m, t);
    for (int k = 0; k < 6; ++k) U[36 + k] = a[k] + t[k];
  }
  {  // u3
    T m[6], Yx[6];
    idsva_mcross(psid_i, psj, m);
    inertia_apply(Y, psj, Yx);
    idsva_var_shared(Y, psid_i, Yx, m, a);
    force_cross_add(psj, ICpsid, a);
    idsva_mat(BC, psj, t);
    force_cross_add(Si, t, a);
    idsva_mcross(Si, psj, m);
    idsva_mat(BC, m, t);
    for (int k = 0; k < 6; ++k) a[k] -= t[k];
    idsva_mcross(Si, cj + 12, m);
    inertia_apply(Y, cj + 12, Yx);
    idsva_var_shared(Y, Si, Yx, m, t);
    for (int k = 0; k < 6; ++k) a[k] += t[k];
    force_cross_add(Sj, P + 12, a);
    for (int k = 0; k < 6; ++k) U[24 + k] = a[k];
  }
}

template <typename T>
GRID_HOST_DEVICE inline void idsva_sweep(int nb, int nv, const int* parent,
                                         const int* dof_start, const int* dof_count,
                                         const int* body_of, const int* chain_start,
                                         const int* chain, T* K, T* out) {
  const int n3 = nv * nv * nv;
  for (int k = 0; k < 4 * n3; ++k) out[k] = T{};
  T* const D2Q = out;
  T* const D2V = out + n3;
  T* const DQDV = out + 2 * n3;
  T* const DM = out + 3 * n3;
#define GRID_AT(i, j, k) (((i) * nv + (j)) * nv + (k))
  T* const bodies = K + 24 * nv;
  for (int b = nb - 1; b >= 0; --b) {
    T* const Y = bodies + 52 * b;
    const T* const BC = Y + 10;
    const T* const F = Y + 46;
    for (int ip = dof_start[b]; ip < dof_start[b] + dof_count[b]; ++ip) {
      const T* const ci = K + 24 * ip;
      T P[30];
      idsva_column_terms(Y, BC, F, ci, P);
      for (int c = chain_start[b]; c < chain_start[b + 1]; ++c) {
        const int jq = chain[c];
        const int bj = body_of[jq];
        const bool same_ij = bj == b;
        T U[48], u10[6], u11[6];
        idsva_turn(Y, BC, ci, P, K + 24 * jq, U);
        const T* const u9 = U;
        const T* const u58 = U + 6;  // also u8 - u12
        const T* const u1 = U + 12;
        const T* const u2 = U + 18;
        const T* const u3 = U + 24;
        const T* const u6 = U + 30;
        const T* const u7 = U + 36;
        const T* const u4 = U + 42;
        for (int k = 0; k < 6; ++k) {
          u10[k] = u2[k] + u9[k];
          u11[k] = u2[k] - u9[k];
        }
        for (int e = chain_start[bj]; e < chain_start[bj + 1]; ++e) {
          const int kr = chain[e];
          const bool same_jk = body_of[kr] == bj;
          const T* const Sk = K + 24 * kr;
          const T* const psk = Sk + 6;
          const T* const pddk = Sk + 12;
          const T* const psk_phk = Sk + 18;
          const T p1 = idsva_dot(u11, psk);
          const T p2 = idsva_dot(u9, pddk) + idsva_dot(u58, psk);
          D2Q[GRID_AT(ip, jq, kr)] = p2;
          DQDV[GRID_AT(ip, kr, jq)] = -p1;
          if (!same_ij) {
            const T p3 = -idsva_dot(u11, Sk);
            const T p4 = idsva_dot(Sk, u2);
            const T v = idsva_dot(u1, psk) + idsva_dot(u2, pddk);
            D2Q[GRID_AT(jq, kr, ip)] = v;
            D2Q[GRID_AT(jq, ip, kr)] = v;
            DQDV[GRID_AT(jq, kr, ip)] = p1;
            DQDV[GRID_AT(jq, ip, kr)] = idsva_dot(u1, Sk) + idsva_dot(u2, psk_phk);
            D2V[GRID_AT(jq, kr, ip)] = -p3;
            D2V[GRID_AT(jq, ip, kr)] = -p3;
            DM[GRID_AT(kr, jq, ip)] = p4;
            DM[GRID_AT(jq, kr, ip)] = p4;
          }
          if (!same_jk) {
            const T p3 = -idsva_dot(u11, Sk);
            const T p5 = idsva_dot(Sk, u9);
            const T v = idsva_dot(Sk, u3);
            D2Q[GRID_AT(ip, kr, jq)] = p2;
            D2Q[GRID_AT(kr, ip, jq)] = v;
            D2V[GRID_AT(ip, jq, kr)] = p3;
            D2V[GRID_AT(ip, kr, jq)] = p3;
            DQDV[GRID_AT(ip, jq, kr)] = idsva_dot(Sk, u58) + idsva_dot(u9, psk_phk);
            DQDV[GRID_AT(kr, jq, ip)] = idsva_dot(Sk, u6);
            DM[GRID_AT(kr, ip, jq)] = p5;
            DM[GRID_AT(ip, kr, jq)] = p5;
            if (!same_ij) {
              const T p6 = idsva_dot(Sk, u10);
              D2Q[GRID_AT(kr, jq, ip)] = v;
              D2V[GRID_AT(kr, ip, jq)] = p6;
              D2V[GRID_AT(kr, jq, ip)] = p6;
              DQDV[GRID_AT(kr, ip, jq)] = idsva_dot(Sk, u7);
            } else {
              D2V[GRID_AT(kr, jq, ip)] = idsva_dot(Sk, u4);
            }
          } else {
            D2V[GRID_AT(ip, jq, kr)] = -idsva_dot(u2, Sk);
          }
        }
      }
    }
    const int p = parent[b];
    if (p >= 0) {
      T* const Yp = bodies + 52 * p;
      for (int k = 0; k < 52; ++k) Yp[k] += Y[k];
    }
  }
#undef GRID_AT
}

/// The barriers between the gather form's steps: a block's on the GPU, none on the host.
struct idsva_block_sync {
  GRID_INLINE void operator()() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};
/// The same where an item's team is one warp: the warp's own barrier, so that the block's
/// items do not wait for each other between steps.
struct idsva_warp_sync {
  GRID_INLINE void operator()() const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
};
struct idsva_no_sync {
  GRID_INLINE void operator()() const {}
};

/// The tile form's moves (emit/idsva_gather.py): `n` scalars copied or zeroed by the
/// threads `rank` of `team`. On the GPU a float or double array whose addresses (and `n`)
/// allow it moves in 16-byte vectors; the layout aligns the shared side, and an output
/// pointer that is not aligned takes scalars.
template <typename T>
GRID_HOST_DEVICE inline void idsva_copy(T* GRID_RESTRICT dst, const T* GRID_RESTRICT src, int n,
                                        int rank, int team) {
  for (int e = rank; e < n; e += team) store_once(dst + e, src[e]);
}
template <typename T>
GRID_HOST_DEVICE inline void idsva_zero(T* GRID_RESTRICT dst, int n, int rank, int team) {
  for (int e = rank; e < n; e += team) dst[e] = T{};
}
#if GRID_IS_CUDA
/// The 16-byte forms, one per scalar type (V: the vector type, W: its scalars).
#define GRID_IDSVA_VECTOR_MOVES(S, V, W)                                                    \
  GRID_HOST_DEVICE inline void idsva_copy(S* GRID_RESTRICT dst, const S* GRID_RESTRICT src, \
                                          int n, int rank, int team) {                      \
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0 && \
        n % W == 0) {                                                                       \
      V* const d = reinterpret_cast<V*>(dst);                                               \
      const V* const s = reinterpret_cast<const V*>(src);                                   \
      for (int e = rank; e < n / W; e += team) store_once(d + e, s[e]);                     \
      return;                                                                               \
    }                                                                                       \
    for (int e = rank; e < n; e += team) store_once(dst + e, src[e]);                       \
  }                                                                                         \
  GRID_HOST_DEVICE inline void idsva_zero(S* GRID_RESTRICT dst, int n, int rank, int team) { \
    if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0 && n % W == 0) {                       \
      V* const d = reinterpret_cast<V*>(dst);                                               \
      const V zero = V();                                                                   \
      for (int e = rank; e < n / W; e += team) d[e] = zero;                                 \
      return;                                                                               \
    }                                                                                       \
    for (int e = rank; e < n; e += team) dst[e] = S{};                                      \
  }
GRID_IDSVA_VECTOR_MOVES(float, float4, 4)
GRID_IDSVA_VECTOR_MOVES(double, double2, 2)
#undef GRID_IDSVA_VECTOR_MOVES
#endif

/// The gather form (symbolic/idsva_gather.py, emit/idsva_gather.py), its first step:
/// every body's entries (rigid inertia, BC, net force; 52 per body, `bodies`) summed over
/// its subtree, bodies numbered parents first. Component k of every body is one thread's
/// (`rank`, of `team` threads).
template <typename T>
GRID_HOST_DEVICE inline void idsva_composites(int nb, const int* parent, T* bodies, int rank,
                                              int team) {
  for (int k = rank; k < 52; k += team) {
    for (int b = nb - 1; b > 0; --b) {
      const int p = parent[b];
      if (p >= 0) bodies[52 * p + k] += bodies[52 * b + k];
    }
  }
}

/// The gather form's second step: the eight vectors of turn (ip, jq) into U (6 each),
/// from the columns (`stride` scalars apart: S, psid, psidd, psid + phid) and the bodies
/// with their composites.
template <typename T>
GRID_HOST_DEVICE inline void idsva_turn_vectors(const T* columns, int stride, const T* bodies,
                                                const int* body_of, int ip, int jq, T* U) {
  const T* const Y = bodies + 52 * body_of[ip];
  const T* const ci = columns + stride * ip;
  T P[30];
  idsva_column_terms(Y, Y + 10, Y + 46, ci, P);
  idsva_turn(Y, Y + 10, ci, P, columns + stride * jq, U);
}

/// One product of an entry from its 16-bit code: the offset of a 6-vector in U (bits
/// 16-31) and of a motion in the columns (bits 2-15), and its sign (bits 0-1: 0 none,
/// 1 plus, 3 minus).
template <typename T>
GRID_INLINE T idsva_gather_product(unsigned code, const T* U, const T* columns) {
  const T p = idsva_dot(U + (code >> 16), columns + ((code >> 2) & 0x3fffu));
  return (code & 2u) ? -p : p;
}

/// The gather form's third step: one entry of the four blocks from its code, two product
/// codes (`idsva_gather_product`) in the low and high words: both 0 for a structural
/// zero, the second 0 where one product is the entry.
template <typename T>
GRID_HOST_DEVICE inline T idsva_gather_entry(unsigned long long code, const T* U,
                                             const T* columns) {
  const unsigned first = (unsigned)code, second = (unsigned)(code >> 32);
  T value{};
  if (first != 0u) value = idsva_gather_product(first, U, columns);
  if (second != 0u) value += idsva_gather_product(second, U, columns);
  return value;
}

/// `Once` (of `idsva_gather_sparse`): the entries are final output (`store_once`);
/// fdsva_so reads its blocks back (its step 5), and streamed there they came back from
/// DRAM (go2: 36% slower).
template <bool Once, typename V>
GRID_INLINE void idsva_put(V* out, V v) {
  if constexpr (Once) store_once(out, v);
  else *out = v;
}
template <bool Once, typename T>
GRID_INLINE void idsva_move4(T* out, const T* v) {
  for (int k = 0; k < 4; ++k) idsva_put<Once>(out + k, v[k]);
}
#if GRID_IS_CUDA
template <bool Once>
GRID_INLINE void idsva_move4(float* out, const float* v) {
  idsva_put<Once>(reinterpret_cast<float4*>(out), *reinterpret_cast<const float4*>(v));
}
template <bool Once>
GRID_INLINE void idsva_move4(double* out, const double* v) {
  const double2* const w = reinterpret_cast<const double2*>(v);
  idsva_put<Once>(reinterpret_cast<double2*>(out), w[0]);
  idsva_put<Once>(reinterpret_cast<double2*>(out) + 1, w[1]);
}
#endif
/// Entries 0..n-1 of the four blocks (the memory form's step 4) by the threads `rank` of
/// `team`, `Chunk` consecutive entries at a time (a multiple of 4 up to 128), only the
/// non-zero ones computed: chunk c's are `codes[chunks[c] .. chunks[c + 1])`
/// (`idsva_gather_entry`), each at entry `Chunk c + slots[k]`. On the GPU (`team` whole
/// warps, `n` a multiple of 4, `out` 16-byte aligned) a warp takes a chunk: its lanes
/// compute the chunk's non-zero entries (g1: 28 of 128 on average) one per lane into the
/// warp's zeroed `stage` (`Chunk` scalars in shared memory, 16-byte aligned, per warp),
/// then lanes store four consecutive entries each, so a warp's stores fill whole sectors
/// while its products are not spent on the structural zeros (each loads 12 or 24 shared
/// scalars). A lane's code of the warp's next chunk is loaded one chunk ahead and the
/// bounds of the chunk after it two ahead (the tables are read through L2). Elsewhere the
/// chunks are zeroed and filled in turn. Out of line: inlined in the gather kernel (128
/// registers) its loop spilled (Nsight Compute, g1 at 1,024: 8.3 M local spill requests
/// against 0.6 M); the caller's live values are saved once.
template <typename T, bool Once, int Chunk>
GRID_NOINLINE void idsva_gather_sparse(const unsigned long long* GRID_RESTRICT codes,
                                       const unsigned char* GRID_RESTRICT slots,
                                       const int* GRID_RESTRICT chunks, const T* U,
                                       const T* columns, T* GRID_RESTRICT out, int n,
                                       int rank, int team, T* GRID_RESTRICT stage) {
  const int count = (n + Chunk - 1) / Chunk;
#if defined(__CUDA_ARCH__)
  if (team % 32 == 0 && n % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
    const int lane = rank & 31, warps = team >> 5;
    T* const mine = stage + Chunk * (rank >> 5);
    int c = rank >> 5;
    // Chunk c's bounds and this lane's code are in hand, chunk c + warps's bounds too: an
    // iteration issues the next chunk's code load and the bounds of the one after, so
    // neither waits on the other (two L2 round trips in a row) at the top of the loop.
    int k = 0, end = 0, slot = 0, next_k = 0, next_end = 0;
    unsigned long long code = 0ull;
    if (c < count) {
      k = chunks[c] + lane;
      end = chunks[c + 1];
      if (k < end) code = codes[k], slot = slots[k];
    }
    if (c + warps < count) next_k = chunks[c + warps] + lane, next_end = chunks[c + warps + 1];
    for (; c < count; c += warps) {
      int next_slot = 0, after_k = 0, after_end = 0;
      unsigned long long next_code = 0ull;
      if (next_k < next_end) next_code = codes[next_k], next_slot = slots[next_k];
      if (c + 2 * warps < count) {
        after_k = chunks[c + 2 * warps] + lane;
        after_end = chunks[c + 2 * warps + 1];
      }
      idsva_zero(mine, Chunk, lane, 32);
      __syncwarp();
      if (k < end) mine[slot] = idsva_gather_entry<T>(code, U, columns);
      for (int r = k + 32; r < end; r += 32)
        mine[slots[r]] = idsva_gather_entry<T>(codes[r], U, columns);
      __syncwarp();
      for (int o = 4 * lane; o < Chunk; o += 128)
        if (Chunk * c + o < n) idsva_move4<Once>(out + Chunk * c + o, mine + o);
      __syncwarp();  // the stage is read before the next chunk zeroes it
      k = next_k, end = next_end, code = next_code, slot = next_slot;
      next_k = after_k, next_end = after_end;
    }
    return;
  }
#endif
  (void)stage;
  for (int c = rank; c < count; c += team) {
    const int first = Chunk * c;
    const int last = first + Chunk < n ? first + Chunk : n;
    for (int e = first; e < last; ++e) idsva_put<Once>(out + e, T{});
    for (int k = chunks[c]; k < chunks[c + 1]; ++k)
      idsva_put<Once>(out + first + slots[k], idsva_gather_entry<T>(codes[k], U, columns));
  }
}

}  // namespace grid
