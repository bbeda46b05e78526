/* grid/idsva.h: the backward sweep of IDSVA (second-order inverse dynamics) as loops over
 * the tree, for robots whose unrolled sweep is too much code (symbolic/idsva.py holds the
 * same algorithm, traced; its docstring gives the notation).
 *
 * K (per item, written by the traced forward pass `idsva_forward`): per dof d at 24 d the
 * world-frame S, psid, psidd, phid (6 each); per body b at 24 nv + 52 b its rigid inertia
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

/// out = v x* (Y x) - Y (v x) (the rate of the rigid inertia Y along v, applied to x).
template <typename T>
GRID_INLINE void idsva_var(const T* Y, const T* v, const T* x, T* out) {
  T Yx[6], vx[6], t[6];
  inertia_apply(Y, x, Yx);
  idsva_fcross(v, Yx, out);
  idsva_mcross(v, x, vx);
  inertia_apply(Y, vx, t);
  for (int k = 0; k < 6; ++k) out[k] -= t[k];
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

/// out = r3 x = var(Y, psid) x + x x* (Y psid) + S x* (BC x) - BC (S x x), the matrix of
/// the sweep applied to u3 and u7 (`Ypsid` = Y psid).
template <typename T>
GRID_INLINE void idsva_r3(const T* Y, const T* BC, const T* S, const T* psid, const T* Ypsid,
                          const T* x, T* out) {
  T t[6], w[6];
  idsva_var(Y, psid, x, out);
  force_cross_add(x, Ypsid, out);
  idsva_mat(BC, x, t);
  force_cross_add(S, t, out);
  idsva_mcross(S, x, t);
  idsva_mat(BC, t, w);
  for (int k = 0; k < 6; ++k) out[k] -= w[k];
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
      const T* const Si = K + 24 * ip;
      const T* const psid_i = Si + 6;
      const T* const psidd_i = Si + 12;
      const T* const phid_i = Si + 18;
      T ICS[6], ICpsid[6], f5[6], f7[6], BtS[6], t[6], t2[6];
      inertia_apply(Y, Si, ICS);
      inertia_apply(Y, psid_i, ICpsid);
      // f5 = BC psid_i + S_i x* F + IC psidd_i;  f7 = BC S_i + IC (psid_i + phid_i)
      idsva_mat(BC, psid_i, f5);
      force_cross_add(Si, F, f5);
      inertia_apply(Y, psidd_i, t);
      for (int k = 0; k < 6; ++k) f5[k] += t[k];
      for (int k = 0; k < 6; ++k) t2[k] = psid_i[k] + phid_i[k];
      idsva_mat(BC, Si, f7);
      inertia_apply(Y, t2, t);
      for (int k = 0; k < 6; ++k) f7[k] += t[k];
      idsva_mat_t(BC, Si, BtS);
      for (int c = chain_start[b]; c < chain_start[b + 1]; ++c) {
        const int jq = chain[c];
        const int bj = body_of[jq];
        const bool same_ij = bj == b;
        const T* const Sj = K + 24 * jq;
        const T* const psj = Sj + 6;
        const T* const pddj = Sj + 12;
        const T* const phj = Sj + 18;
        T u1[6], u2[6], u3[6], u4[6], u5[6], u6[6], u7[6], u8[6], u9[6], u10[6], u11[6],
            u12[6], varS_psj[6], psj_ICS[6], SixSj[6], w[6], x[6];
        idsva_var(Y, Si, Sj, u2);
        idsva_fcross(Sj, ICS, u9);
        idsva_var(Y, Si, psj, varS_psj);
        idsva_mcross(Si, Sj, SixSj);
        idsva_fcross(psj, ICS, psj_ICS);
        // u1 = var(psid_i) Sj - Sj x* ICpsid - BC^T (Si x Sj) + Si x* (BC^T Sj)
        idsva_var(Y, psid_i, Sj, u1);
        idsva_fcross(Sj, ICpsid, w);
        for (int k = 0; k < 6; ++k) u1[k] -= w[k];
        idsva_mat_t(BC, SixSj, w);
        for (int k = 0; k < 6; ++k) u1[k] -= w[k];
        idsva_mat_t(BC, Sj, x);
        force_cross_add(Si, x, u1);
        // u3 = r3 psj + var(Si) pddj + Sj x* f5
        idsva_r3(Y, BC, Si, psid_i, ICpsid, psj, u3);
        idsva_var(Y, Si, pddj, w);
        for (int k = 0; k < 6; ++k) u3[k] += w[k];
        force_cross_add(Sj, f5, u3);
        // u4 = u9 + Si x* (IC Sj)
        inertia_apply(Y, Sj, x);
        for (int k = 0; k < 6; ++k) u4[k] = u9[k];
        force_cross_add(Si, x, u4);
        for (int k = 0; k < 6; ++k) {
          u5[k] = psj_ICS[k] - varS_psj[k];
          u6[k] = varS_psj[k] + psj_ICS[k];
          u10[k] = u2[k] + u9[k];
          u11[k] = u2[k] - u9[k];
          u12[k] = varS_psj[k] - psj_ICS[k];
        }
        force_cross_add(Sj, f7, u6);
        // u7 = r3 Sj + var(Si) (psj + phj)
        idsva_r3(Y, BC, Si, psid_i, ICpsid, Sj, u7);
        for (int k = 0; k < 6; ++k) x[k] = psj[k] + phj[k];
        idsva_var(Y, Si, x, w);
        for (int k = 0; k < 6; ++k) u7[k] += w[k];
        idsva_fcross(Sj, BtS, u8);
        for (int e = chain_start[bj]; e < chain_start[bj + 1]; ++e) {
          const int kr = chain[e];
          const bool same_jk = body_of[kr] == bj;
          const T* const Sk = K + 24 * kr;
          const T* const psk = Sk + 6;
          const T* const pddk = Sk + 12;
          T psk_phk[6], u8m12[6];
          for (int k = 0; k < 6; ++k) {
            psk_phk[k] = psk[k] + Sk[18 + k];
            u8m12[k] = u8[k] - u12[k];
          }
          const T p1 = idsva_dot(u11, psk);
          const T p2 = idsva_dot(u9, pddk) + idsva_dot(u8m12, psk);
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
            T u58[6];
            for (int k = 0; k < 6; ++k) u58[k] = u5[k] + u8[k];
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

}  // namespace grid
