// The subgroup-cooperative SDPA forward mainloop of the xmx family (seed 000 structure), written
// once over DPAS-shaped fragments through the tile ops of sdpa_xmx_ops.hpp (native Xe built-ins
// on Intel GPUs, their emulation elsewhere).
//
// A work-group owns BQ rows of one (batch, KV head); rows pack the GQA group, row R = q * G + g
// (as sdpa_mainloop.hpp), so K/V are read once for all G query heads. Its SG_Q x SG_K subgroups
// of 16 lanes: subgroup (sq, sk) owns rows [sq * RPS, (sq + 1) * RPS) of the tile (RPS = BQ /
// SG_Q, MF = RPS / 8 fragments) and keys [sk * KS, (sk + 1) * KS) of every K block of BK keys
// (KS = BK / SG_K, NF = KS / 16 fragments), running its own online softmax over that share.
// Per K block: S [RPS, KS] = Q x K^T in BD slices (K^T through transposed 2D block loads) ->
// scale by qscale = scale * log2(e) and mask -> online softmax with exp2 -> O [RPS, Dv] += P x V
// in VTILES splits of BV columns (V through VNNI 2D block loads). Keys past kv_len read 0 (the
// block loads' bounds check) and are masked. After the K loop, combine() merges the SG_K
// partial (m, l, O) of the same rows through local memory.
//
// Prefetch: the work-group prefetches the K and V blocks Stages ahead once, its subgroups
// sharing the 2D block prefetch messages of a block (a subgroup issues every NSG-th one).
//
// Local memory: Q of the tile as T, staged once in tile-major order (8 x 16 fragments stored
// contiguously, each one subgroup block read; packed GQA rows have two pitches, so Q cannot be
// a 2D block surface), reused after the K loop as the combine buffer [BQ][DV / 2] fp32; then
// (SG_K > 1) the row (m, l) pairs [BQ][2].
//
// Per-row state (m, l, rescale, last key) is kept as RowVecs, one register per fragment. Every
// fragment loop has a constexpr trip count and is marked XE2T_XMX_FRAGMENT_LOOP (fully unrolled
// on Intel GPUs); the K-block loop is never unrolled, so the program holds exactly
// MF * NF * (D + DV) / 16 DPAS: MF * NF * D / 16 for S, MF * NF * DV / 16 for P x V (the Python
// family's expected_matrix_mads).
#pragma once

#include "sdpa_mainloop.hpp"
#include "sdpa_xmx_fragment.hpp"
#include "sdpa_xmx_ops.hpp"

namespace xe2t::xmx {

// Dispatch tag of the mainloop specialization (SYCL*TLA's XeDefault<Stages>): K/V blocks are
// prefetched Stages blocks ahead.
template <int Stages>
struct XeDefault {};

// The compile-time shape of one instantiation; the static_asserts mirror the Python family's
// invalid_reason (kernels/_xmx_family.py).
// T_ is Q/K/V's element type for MHA/GQA (Dv = D); latent attention (Dv != D) passes a
// KvVariant (sdpa_mainloop.hpp) naming V's head dim instead, so the MHA instantiation stays as
// it was. DV is the V columns one work-group computes: Dv, or Dv / n when the decode splits Dv
// among n work-groups (DV_ROW = Dv: V's rows and the partial O's).
template <class T_, int D_, int BQ_, int BK_, int BD_, int BV_, int SGQ_, int SGK_>
struct Shape {
  using T = typename Operands<T_, D_>::Q;
  using KV = typename Operands<T_, D_>::KV;  // T, or an FP8 element (sdpa_xmx_fp8.hpp)
  static constexpr int D = D_, DV = Operands<T_, D_>::DV, BQ = BQ_, BK = BK_, BD = BD_, BV = BV_;
  static constexpr int DV_ROW = Operands<T_, D_>::DV_ROW, DV_SPLITS = DV_ROW / DV;
  static constexpr int SGQ = SGQ_, SGK = SGK_, NSG = SGQ * SGK;
  static constexpr int RPS = BQ / SGQ, KS = BK / SGK;  // rows and keys of one subgroup
  static constexpr int MF = RPS / kM, NF = KS / kN;     // its fragments along rows and keys
  static constexpr int VTILES = DV / BV;
  static constexpr int CW = DV / 2;  // combine chunk: BQ x CW fp32 fill the Q area exactly

  static_assert(BQ % SGQ == 0 && RPS % kM == 0, "rows per subgroup must be a multiple of 8");
  static_assert(BK % SGK == 0 && KS % kN == 0, "keys per subgroup must be a multiple of 16");
  static_assert(BD % kK == 0 && D % BD == 0, "BD must be a multiple of 16 dividing D");
  static_assert(BV % kN == 0 && DV % BV == 0, "BV must be a multiple of 16 dividing Dv");
  static_assert(CW % kN == 0, "Dv / 2 must be a multiple of 16 (combine chunks)");
  static_assert(D % 32 == 0 && DV % 32 == 0, "prefetch messages cover 32 columns");
  static_assert(DV <= D, "the combine chunk [BQ][Dv / 2] fp32 reuses Q's [BQ][D] T area");
  static_assert(sizeof(T) == 2, "the xmx family serves fp16 and bf16 only");

  // 64-byte registers of one subgroup's fragments, a hard lower bound: Q [RPS, BD] as T,
  // S [RPS, KS] fp32, P [RPS, KS] as T, O [RPS, DV] fp32 (the Python family's
  // fragment_registers; its validation adds the row state and reserve fitted to IGC).
  static constexpr int regs(int bytes) { return (bytes + 63) / 64; }
  static constexpr int FRAGMENT_REGISTERS = regs(RPS * BD * 2) + regs(RPS * KS * 4) +
                                            regs(RPS * KS * 2) + regs(RPS * DV * 4);
};

// The tile ops that load K and V fragments: the tile ops themselves for K/V in Q's element
// type; FP8 K/V builds specialize this in sdpa_xmx_fp8.hpp (their own loaders).
template <class Ops, class KV>
struct KvLoadsOf {
  using type = Ops;
};

template <class Dispatch, class Ops, class S>
struct XmxMainloop {
  static_assert(sizeof(Dispatch) == 0, "no xmx mainloop specialization for this dispatch policy");
};

template <int Stages, class Ops, class S>
struct XmxMainloop<XeDefault<Stages>, Ops, S> {
  using T = typename S::T;
  using KV = typename S::KV;
  using KvLoads = typename KvLoadsOf<Ops, KV>::type;
  using RowVec = typename Ops::RowVec;
  static constexpr int MF = S::MF, NF = S::NF, NDV = S::DV / kN, D = S::D, DV = S::DV;
  static constexpr int DV_ROW = S::DV_ROW;
  static_assert(Stages >= 0, "Stages is a prefetch distance >= 0");

  static constexpr int Q_BYTES = S::BQ * D * 2;
  static constexpr int ML_BYTES = S::SGK > 1 ? S::BQ * 2 * 4 : 0;
  static constexpr int LOCAL_FLOATS = (Q_BYTES + ML_BYTES) / 4;
  static constexpr int FRAG_ELEMS = kM * kK;  // one tile-major Q fragment

  // The (batch, KV head) slice: Q row R of the packed rows, K and V.
  struct Slice {
    const T *q;  // Q[b, 0, hkv * G, 0]
    Rows<KV> k;
    Rows<KV> v;
    const Geometry *g;

    // V's columns [v_col0, v_col0 + DV) of its DV_ROW (a Dv split of the decode; else all).
    static Slice of(const T *q, const KV *k, const KV *v, const Geometry &g, int b, int hkv,
                    int v_col0 = 0) {
      const size_t q_off = (static_cast<size_t>(b) * g.q_len * g.heads_q + hkv * g.group) * D;
      const size_t kv_off = (static_cast<size_t>(b) * g.kv_len * g.heads_kv + hkv) * D;
      const size_t pitch = static_cast<size_t>(g.heads_kv) * D;
      // Constant conditions: MHA code is exactly the offsets it always was.
      constexpr bool kWholeV = DV == D && DV_ROW == D;
      const size_t v_off =
          kWholeV ? kv_off
                  : (static_cast<size_t>(b) * g.kv_len * g.heads_kv + hkv) * DV_ROW + v_col0;
      const size_t v_pitch = kWholeV ? pitch : static_cast<size_t>(g.heads_kv) * DV_ROW;
      return {q + q_off, {k + kv_off, pitch, g.kv_len, D}, {v + v_off, v_pitch, g.kv_len, DV}, &g};
    }
    const T *q_row(int row) const {
      // MHA (group 1) skips the integer division, dozens of instructions on Xe.
      const int qi = g->group == 1 ? row : row / g->group;
      return q + (static_cast<size_t>(qi) * g->heads_q + (row - qi * g->group)) * D;
    }
    // Offset of row R's O row in O, for Q starting at q_base: O has Q's layout, Dv columns.
    std::ptrdiff_t o_offset(const T *q_base, int row) const {
      if constexpr (DV_ROW == D) {
        return q_row(row) - q_base;
      } else {
        return (q_row(row) - q_base) / D * DV_ROW;
      }
    }
  };

  // The local memory of one work-group, carved as described at the top.
  struct Smem {
    T *q;         // [BQ / 8][D / 16] fragments of 8 x 16
    float *comb;  // [BQ][CW], aliasing q after the K loop
    float *ml;    // [BQ][2]
    static Smem of(float *base) {
      char *bytes = reinterpret_cast<char *>(base);
      return {reinterpret_cast<T *>(bytes), base, reinterpret_cast<float *>(bytes + Q_BYTES)};
    }
    // The fragment of tile rows [8 * rf, 8 * rf + 8) and columns [16 * cf, 16 * cf + 16).
    const T *q_fragment(int rf, int cf) const {
      return q + (static_cast<size_t>(rf) * (D / kK) + cf) * FRAG_ELEMS;
    }
  };

  // The state of one subgroup: O [RPS, DV] unnormalized, row max (log2 domain) and row sum.
  struct State {
    typename Ops::Acc o[MF][NDV];
    RowVec m[MF];
    RowVec l[MF];
  };

  // One past the last K block any row up to last_row may see (0 when none sees a key).
  static int block_end(const Geometry &g, int last_row) {
    const int last = sycl::min(g.last_key(last_row), g.kv_len - 1);
    return last < 0 ? 0 : last / S::BK + 1;
  }

  // Work-group cooperative copy of rows [row0, row0 + BQ) of Q into local memory, tile-major
  // (padding rows past the slice's rows are 0; 16 consecutive work-items read 16 consecutive
  // elements of a row). fp16/bf16 move as raw 16-bit words. Callers barrier after it.
  static void stage_q(const Slice &s, int row0, T *q, int tid, int nt) {
    auto *dst = reinterpret_cast<std::uint16_t *>(q);
    for (int i = tid; i < S::BQ * D; i += nt) {
      const int frag = i / FRAG_ELEMS, in = i % FRAG_ELEMS;
      const int row = row0 + frag / (D / kK) * kM + in / kK;
      const int d = frag % (D / kK) * kK + in % kK;
      dst[i] = row < s.g->rows()
                   ? reinterpret_cast<const std::uint16_t *>(s.q_row(row))[d]
                   : std::uint16_t{0};
    }
  }

  // K and V of block kb towards the caches, once per work-group: its 2D block prefetch
  // messages (PR rows x 32 columns) dealt round-robin to the NSG subgroups.
  static void prefetch_block(sycl::sub_group sg, const Slice &s, int kb, int sgid) {
    // The 16-bit prefetch messages address T columns; FP8 K/V rows are not prefetched.
    if constexpr (std::is_same_v<KV, T>) {
      constexpr int PR = S::BK % 32 == 0 ? 32 : 16;
      constexpr int K_MSGS = S::BK / PR * (D / 32), V_MSGS = S::BK / PR * (DV / 32);
      const xe::Surface k = Ops::surface(s.k), v = Ops::surface(s.v);
      for (int i = sgid; i < K_MSGS + V_MSGS; i += S::NSG) {
        const bool is_v = i >= K_MSGS;
        const int j = is_v ? i - K_MSGS : i, cols = (is_v ? DV : D) / 32;
        Ops::Builtins::template prefetch<PR>(sg, is_v ? v : k, j % cols * 32,
                                             kb * S::BK + j / cols * PR);
      }
    }
  }

  // K blocks [kb0, kb1) for subgroup (sq, sk) of the tile whose first row is tile_row0, with
  // the tile's Q staged in sm. No barriers: subgroups leave the loop independently.
  static void run(sycl::sub_group sg, const Slice &s, const Smem &sm, int tile_row0, int sq,
                  int sk, int kb0, int kb1, State &st) {
    const Geometry &g = *s.g;
    RowVec last[MF];  // last key each row sees; -1 for padding rows
    int last_max = -1, last_min = g.kv_len;
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf) {
      const int row = tile_row0 + sq * S::RPS + mf * kM + Ops::row_of_lane(sg);
      const int key = row < g.rows() ? sycl::min(g.last_key(row), g.kv_len - 1) : -1;
      last[mf] = static_cast<float>(key);  // exact: keys < 2^24
      last_max = sycl::max(last_max, sycl::reduce_over_group(sg, key, sycl::maximum<int>()));
      last_min = sycl::min(last_min, sycl::reduce_over_group(sg, key, sycl::minimum<int>()));
      st.m[mf] = kNegInf;
      st.l[mf] = 0.0f;
    }
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int n = 0; n < NDV; ++n) Ops::fill(sg, st.o[mf][n], 0.0f);
    const int sgid = sk * S::SGQ + sq;
    const int rf0 = sq * S::RPS / kM;
    for (int kb = kb0; kb < sycl::min(kb0 + Stages, kb1); ++kb) prefetch_block(sg, s, kb, sgid);
#pragma unroll 1
    for (int kb = kb0; kb < kb1; ++kb) {
      const int key0 = kb * S::BK + sk * S::KS;
      // Keys ascend with kb: once past every key of the rows, all later blocks are too.
      if (key0 > last_max) break;
      if (Stages > 0 && kb + Stages < kb1) prefetch_block(sg, s, kb + Stages, sgid);
      block(sg, s, sm, rf0, key0, key0 + S::KS - 1 > last_min, last, st);
    }
  }

  // One K block: S = Q K^T, mask, online softmax, O = alpha O + P V.
  static void block(sycl::sub_group sg, const Slice &s, const Smem &sm, int rf0, int key0,
                    bool masked, const RowVec (&last)[MF], State &st) {
    typename Ops::Acc sc[MF][NF];
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf) Ops::fill(sg, sc[mf][nf], 0.0f);
    XE2T_XMX_FRAGMENT_LOOP
    for (int d0 = 0; d0 < D; d0 += S::BD) {
      typename Ops::A qa[MF][S::BD / kK];  // Q [RPS, BD], reloaded per D slice as the seed does
      XE2T_XMX_FRAGMENT_LOOP
      for (int mf = 0; mf < MF; ++mf)
        XE2T_XMX_FRAGMENT_LOOP
        for (int kk = 0; kk < S::BD / kK; ++kk)
          Ops::load_a(sg, qa[mf][kk], sm.q_fragment(rf0 + mf, (d0 + kk * kK) / kK));
      XE2T_XMX_FRAGMENT_LOOP
      for (int kk = 0; kk < S::BD / kK; ++kk)
        XE2T_XMX_FRAGMENT_LOOP
        for (int nf = 0; nf < NF; ++nf) {
          typename Ops::B kt;
          KvLoads::load_kt(sg, kt, s.k, key0 + nf * kN, d0 + kk * kK);
          XE2T_XMX_FRAGMENT_LOOP
          for (int mf = 0; mf < MF; ++mf) Ops::mad(sg, sc[mf][nf], qa[mf][kk], kt);
        }
    }

    const float qscale = s.g->qscale;
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf) {
        if (masked) {  // a block crossing the causal diagonal or kv_len
          Ops::apply(sg, sc[mf][nf], [&](float &x, int r, int c) {
            x = static_cast<float>(key0 + nf * kN + c) <= Ops::row(sg, last[mf], r)
                    ? x * qscale : kNegInf;
          });
        } else {
          sc[mf][nf] *= qscale;
        }
      }

    typename Ops::A p[MF][NF];
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf) {
      const RowVec m_new =
          sycl::fmax(st.m[mf], Ops::row_reduce(sg, sc[mf], sycl::maximum<float>()));
      // A row that has seen only masked keys keeps m = -inf: subtract 0 so exp2 gives 0.
      const RowVec m_sub = m_new == kNegInf ? 0.0f : m_new;
      const RowVec alpha = Ops::exp2(st.m[mf] - m_sub);
      st.m[mf] = m_new;
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf)
        Ops::apply(sg, sc[mf][nf],
                   [&](float &x, int r, int) { x = Ops::exp2(x - Ops::row(sg, m_sub, r)); });
      st.l[mf] = st.l[mf] * alpha + Ops::row_reduce(sg, sc[mf], sycl::plus<float>());
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf) Ops::to_a(sg, sc[mf][nf], p[mf][nf]);
      XE2T_XMX_FRAGMENT_LOOP
      for (int n = 0; n < NDV; ++n)
        Ops::apply(sg, st.o[mf][n], [&](float &x, int r, int) { x *= Ops::row(sg, alpha, r); });
    }

    XE2T_XMX_FRAGMENT_LOOP
    for (int vv = 0; vv < S::VTILES; ++vv)
      XE2T_XMX_FRAGMENT_LOOP
      for (int nn = 0; nn < S::BV / kN; ++nn)
        XE2T_XMX_FRAGMENT_LOOP
        for (int nf = 0; nf < NF; ++nf) {
          typename Ops::B vb;
          KvLoads::load_v(sg, vb, s.v, key0 + nf * kK, vv * S::BV + nn * kN);
          XE2T_XMX_FRAGMENT_LOOP
          for (int mf = 0; mf < MF; ++mf)
            Ops::mad(sg, st.o[mf][vv * (S::BV / kN) + nn], p[mf][nf], vb);
        }
  }

  // Merges the SG_K key shares of each row into subgroup (sq, 0): in round s, subgroup (sq, s)
  // writes its (m, l) and one CW-column chunk of O to local memory, subgroup (sq, 0) rescales
  // and adds it. Every work-item runs the same 2 * (SG_K - 1) * 2 barriers.
  static void combine(sycl::group<2> wg, sycl::sub_group sg, const Smem &sm, int sq, int sk,
                      State &st) {
    if constexpr (S::SGK > 1) {
      constexpr int kChunks = DV / S::CW;
      constexpr int kChunkFrags = S::CW / kN;
      const int lrow0 = sq * S::RPS;
      // Lanes 2i and 2i + 1 hold row i of a RowVec: the even one writes it.
      const int lane_row = Ops::row_of_lane(sg);
      const bool writer = sg.get_local_linear_id() % 2 == 0;
      RowVec a0[MF];
      RowVec a1[MF];
      for (int s = 1; s < S::SGK; ++s) {
        XE2T_XMX_FRAGMENT_LOOP
        for (int c = 0; c < kChunks; ++c) {
          sycl::group_barrier(wg);  // the K loop (Q reads) or the previous merge is done
          if (sk == s) {
            if (c == 0 && writer) {
              XE2T_XMX_FRAGMENT_LOOP
              for (int mf = 0; mf < MF; ++mf) {
                sm.ml[(lrow0 + mf * kM + lane_row) * 2] = st.m[mf];
                sm.ml[(lrow0 + mf * kM + lane_row) * 2 + 1] = st.l[mf];
              }
            }
            XE2T_XMX_FRAGMENT_LOOP
            for (int mf = 0; mf < MF; ++mf)
              XE2T_XMX_FRAGMENT_LOOP
              for (int n = 0; n < kChunkFrags; ++n)
                Ops::store(sg, st.o[mf][c * kChunkFrags + n],
                           sm.comb + (lrow0 + mf * kM) * S::CW + n * kN, S::CW);
          }
          sycl::group_barrier(wg);
          if (sk != 0) continue;
          if (c == 0) {
            XE2T_XMX_FRAGMENT_LOOP
            for (int mf = 0; mf < MF; ++mf) {
              const RowVec mo = sm.ml[(lrow0 + mf * kM + lane_row) * 2];
              const RowVec lo = sm.ml[(lrow0 + mf * kM + lane_row) * 2 + 1];
              const RowVec m_new = sycl::fmax(st.m[mf], mo);
              const RowVec m_sub = m_new == kNegInf ? 0.0f : m_new;
              a0[mf] = Ops::exp2(st.m[mf] - m_sub);
              a1[mf] = Ops::exp2(mo - m_sub);
              st.l[mf] = a0[mf] * st.l[mf] + a1[mf] * lo;
              st.m[mf] = m_new;
            }
          }
          XE2T_XMX_FRAGMENT_LOOP
          for (int mf = 0; mf < MF; ++mf)
            XE2T_XMX_FRAGMENT_LOOP
            for (int n = 0; n < kChunkFrags; ++n) {
              const float *in = sm.comb + (lrow0 + mf * kM) * S::CW + n * kN;
              Ops::apply(sg, st.o[mf][c * kChunkFrags + n], [&](float &x, int r, int col) {
                x = Ops::row(sg, a0[mf], r) * x + Ops::row(sg, a1[mf], r) * in[r * S::CW + col];
              });
            }
        }
      }
    }
  }
};

}  // namespace xe2t::xmx
