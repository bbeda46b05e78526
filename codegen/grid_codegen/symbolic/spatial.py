"""Spatial algebra written once over any scalar (float, `Sym` or `Dual`), on plain lists.

Conventions (Pinocchio's, as the rest of the project): spatial vectors are 6-lists
`[linear; angular]`; a placement `X = (R, p)` holds `R` as a row-major 9-list and `p` as
a 3-list with `x_parent = R x_child + p`. As a motion transform it maps parent
coordinates to child ones (Featherstone's `Xup`); its transpose maps child forces to the
parent. A rigid-body inertia is Pinocchio's 10-vector about the frame origin
`[m, h = m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`. A symmetric 6x6 matrix (an articulated
inertia) is a 6x6 list of lists whose mirrored entries are the same object, so that each
independent entry is computed once.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.symbolic.dual import sqrt

Vec = list
Placement = tuple  # (R: 9-list, p: 3-list)


def dot(a: Sequence, b: Sequence) -> object:
    acc: object = 0.0
    for x, y in zip(a, b, strict=True):
        acc = acc + x * y
    return acc


def cross3(a: Sequence, b: Sequence) -> Vec:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def rot(R: Sequence, v: Sequence) -> Vec:
    """`R v`."""
    return [R[3 * i] * v[0] + R[3 * i + 1] * v[1] + R[3 * i + 2] * v[2] for i in range(3)]


def rot_t(R: Sequence, v: Sequence) -> Vec:
    """`R^T v`."""
    return [R[i] * v[0] + R[3 + i] * v[1] + R[6 + i] * v[2] for i in range(3)]


def matmul3(A: Sequence, B: Sequence) -> Vec:
    return [A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j]
            for i in range(3) for j in range(3)]


def compose(a: Placement, b: Placement) -> Placement:
    """`a * b`: apply `b`, then `a` (`R = Ra Rb`, `p = Ra pb + pa`)."""
    Ra, pa = a
    Rb, pb = b
    return matmul3(Ra, Rb), [x + y for x, y in zip(rot(Ra, pb), pa, strict=True)]


def perturb(X: Placement, lin: Sequence, ang: Sequence) -> Placement:
    """`X * (1 + [lin, ang]^)`: `X` moved by the infinitesimal local twist `[lin; ang]`
    (first order, exact for tangents whose primal part is zero)."""
    R, p = X
    wx = [0.0, -ang[2], ang[1], ang[2], 0.0, -ang[0], -ang[1], ang[0], 0.0]
    Rw = matmul3(R, wx)
    return [r + d for r, d in zip(R, Rw, strict=True)], \
        [x + y for x, y in zip(p, rot(R, lin), strict=True)]


def motion_to_child(X: Placement, m: Sequence) -> Vec:
    """`[R^T (m_lin - p x m_ang); R^T m_ang]`."""
    R, p = X
    t = cross3(p, m[3:])
    return rot_t(R, [m[k] - t[k] for k in range(3)]) + rot_t(R, m[3:])


def motion_to_parent(X: Placement, m: Sequence) -> Vec:
    """`[R m_lin + p x (R m_ang); R m_ang]` (Pinocchio's `act`)."""
    R, p = X
    ang = rot(R, m[3:])
    lin = rot(R, m[:3])
    t = cross3(p, ang)
    return [lin[k] + t[k] for k in range(3)] + ang


def force_to_parent(X: Placement, f: Sequence) -> Vec:
    """`[R f_lin; R f_ang + p x (R f_lin)]`."""
    R, p = X
    lin = rot(R, f[:3])
    ang = rot(R, f[3:])
    t = cross3(p, lin)
    return lin + [ang[k] + t[k] for k in range(3)]


def motion_cross(v: Sequence, m: Sequence) -> Vec:
    """`v x m`: `[w x m_lin + v_lin x m_ang; w x m_ang]`."""
    a = cross3(v[3:], m[:3])
    b = cross3(v[:3], m[3:])
    return [a[k] + b[k] for k in range(3)] + cross3(v[3:], m[3:])


def force_cross(v: Sequence, f: Sequence) -> Vec:
    """`v x* f`: `[w x f_lin; v_lin x f_lin + w x f_ang]`."""
    a = cross3(v[:3], f[:3])
    b = cross3(v[3:], f[3:])
    return cross3(v[3:], f[:3]) + [a[k] + b[k] for k in range(3)]


def add(a: Sequence, b: Sequence) -> Vec:
    return [x + y for x, y in zip(a, b, strict=True)]


def sub(a: Sequence, b: Sequence) -> Vec:
    return [x - y for x, y in zip(a, b, strict=True)]


def scale(a: Sequence, s: object) -> Vec:
    return [x * s for x in a]


def inertia_apply(I: Sequence, v: Sequence) -> Vec:
    """`I v` for a rigid-body inertia: `[m v_lin - h x w; h x v_lin + I0 w]`."""
    m, h, w = I[0], I[1:4], v[3:]
    a = cross3(h, w)
    b = cross3(h, v[:3])
    return [m * v[k] - a[k] for k in range(3)] + [
        b[0] + I[4] * w[0] + I[5] * w[1] + I[7] * w[2],
        b[1] + I[5] * w[0] + I[6] * w[1] + I[8] * w[2],
        b[2] + I[7] * w[0] + I[8] * w[1] + I[9] * w[2]]


def inertia_to_parent(X: Placement, I: Sequence) -> Vec:
    """A child-frame rigid inertia (10-vector) expressed in the parent frame:
    `h' = R h + m p`, `I0' = R I0 R^T - (p g^T + g p^T) + (2 g.p + m |p|^2) 1 - m p p^T`
    with `g = R h`."""
    R, p = X
    m = I[0]
    g = rot(R, I[1:4])
    J = [I[4], I[5], I[7], I[5], I[6], I[8], I[7], I[8], I[9]]
    K = rotate_symmetric3(R, J)
    gp = dot(g, p)
    pp = dot(p, p)
    diag = 2.0 * gp + m * pp

    def entry(i: int, j: int) -> object:
        e = K[3 * i + j] - (p[i] * g[j] + g[i] * p[j]) - m * p[i] * p[j]
        return e + diag if i == j else e

    return [m, g[0] + m * p[0], g[1] + m * p[1], g[2] + m * p[2],
            entry(0, 0), entry(0, 1), entry(1, 1), entry(0, 2), entry(1, 2), entry(2, 2)]


def rotate_symmetric3(R: Sequence, S: Sequence) -> Vec:
    """`R S R^T` for a symmetric 3x3 `S` (row-major 9-lists; mirrored entries shared)."""
    T = matmul3(R, S)
    out: list = [None] * 9
    for i in range(3):
        for j in range(i, 3):
            e = T[3 * i] * R[3 * j] + T[3 * i + 1] * R[3 * j + 1] + T[3 * i + 2] * R[3 * j + 2]
            out[3 * i + j] = out[3 * j + i] = e
    return out


def rotate3(R: Sequence, A: Sequence) -> Vec:
    """`R A R^T` for a general 3x3 `A`."""
    T = matmul3(R, A)
    return [T[3 * i] * R[3 * j] + T[3 * i + 1] * R[3 * j + 1] + T[3 * i + 2] * R[3 * j + 2]
            for i in range(3) for j in range(3)]


# -- symmetric 6x6 matrices (articulated inertias) --------------------------------------
def sym6(entry) -> list[list]:
    """A symmetric 6x6 from `entry(i, j)`, evaluated for `i <= j` only."""
    out = [[None] * 6 for _ in range(6)]
    for i in range(6):
        for j in range(i, 6):
            out[i][j] = out[j][i] = entry(i, j)
    return out


def inertia_matrix(I: Sequence) -> list[list]:
    """The 6x6 of a rigid-body inertia: `[[m 1, -[h]], [[h], I0]]`."""
    m, hx, hy, hz = I[0], I[1], I[2], I[3]
    rows = [[m, 0.0, 0.0, 0.0, hz, -hy],
            [0.0, m, 0.0, -hz, 0.0, hx],
            [0.0, 0.0, m, hy, -hx, 0.0],
            [0.0, -hz, hy, I[4], I[5], I[7]],
            [hz, 0.0, -hx, I[5], I[6], I[8]],
            [-hy, hx, 0.0, I[7], I[8], I[9]]]
    return sym6(lambda i, j: rows[i][j])


def mat_vec(A: Sequence[Sequence], v: Sequence) -> Vec:
    return [dot(row, v) for row in A]


def sym6_add(A: list[list], B: list[list]) -> list[list]:
    return sym6(lambda i, j: A[i][j] + B[i][j])


def sym6_congruence_to_parent(X: Placement, A: list[list]) -> list[list]:
    """`Xm^T A Xm` for the parent -> child motion transform `Xm` of `X`: an articulated
    inertia carried from the child frame to the parent frame. With `B = R A R^T`
    blockwise and `P = [p]`:
    `[[B11, B12 - B11 P], [.., B22 + P B12 + (P B12)^T - P B11 P]]`."""
    R, p = X
    A11 = [A[i][j] for i in range(3) for j in range(3)]
    A12 = [A[i][3 + j] for i in range(3) for j in range(3)]
    A22 = [A[3 + i][3 + j] for i in range(3) for j in range(3)]
    B11 = rotate_symmetric3(R, A11)
    B12 = rotate3(R, A12)
    B22 = rotate_symmetric3(R, A22)
    P = [0.0, -p[2], p[1], p[2], 0.0, -p[0], -p[1], p[0], 0.0]
    B11P = matmul3(B11, P)
    PB12 = matmul3(P, B12)
    PB11P = matmul3(P, B11P)
    C12 = [B12[k] - B11P[k] for k in range(9)]

    def entry(i: int, j: int) -> object:
        if j < 3:
            return B11[3 * i + j]
        if i < 3:
            return C12[3 * i + j - 3]
        a, b = i - 3, j - 3
        return B22[3 * a + b] + PB12[3 * a + b] + PB12[3 * b + a] - PB11P[3 * a + b]

    return sym6(entry)


# -- small dense solves (the joint-space blocks D = S^T IA S) ----------------------------
def cholesky(A: Sequence[Sequence]) -> list[list]:
    """Lower-triangular `L` with `A = L L^T` for a symmetric positive-definite `A`."""
    n = len(A)
    L = [[0.0] * n for _ in range(n)]
    for j in range(n):
        d = A[j][j] - dot(L[j][:j], L[j][:j]) if j else A[j][j]
        L[j][j] = sqrt(d)
        inv = 1.0 / L[j][j]
        for i in range(j + 1, n):
            e = A[i][j] - dot(L[i][:j], L[j][:j]) if j else A[i][j]
            L[i][j] = e * inv
    return L


def spd_inverse(A: Sequence[Sequence]) -> list[list]:
    """`A^-1` (symmetric, mirrored entries shared) for a symmetric positive-definite `A`;
    the 1x1 case is one division."""
    n = len(A)
    if n == 1:
        return [[1.0 / A[0][0]]]
    L = cholesky(A)
    # Linv lower triangular, then A^-1 = Linv^T Linv.
    Linv = [[0.0] * n for _ in range(n)]
    for i in range(n):
        Linv[i][i] = 1.0 / L[i][i]
        for j in range(i):
            acc: object = 0.0
            for k in range(j, i):
                acc = acc + L[i][k] * Linv[k][j]
            Linv[i][j] = -acc * Linv[i][i]
    out = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            acc = 0.0
            for k in range(j, n):
                acc = acc + Linv[k][i] * Linv[k][j]
            out[i][j] = out[j][i] = acc
    return out


def quat_to_rotation(quat: Sequence) -> Vec:
    """Rotation (row-major 9-list) of a quaternion `[x, y, z, w]`, normalised first."""
    n = 1.0 / sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] +
                   quat[3] * quat[3])
    x, y, z, w = (c * n for c in quat)
    return [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
            2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)]
