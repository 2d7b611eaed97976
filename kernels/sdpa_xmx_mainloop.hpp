// The subgroup-cooperative SDPA forward mainloop of the xmx family (seed 000 structure), written
// once over DPAS-shaped fragments; the fragment operations are the `Ops` policy
// (sdpa_xmx_ops_joint_matrix.hpp on matrix engines, sdpa_xmx_ops_subgroup.hpp elsewhere).
//
// A work-group owns BQ rows of one (batch, KV head); rows pack the GQA group, row R = q * G + g
// (as sdpa_mainloop.hpp), so K/V are read once for all G query heads. Its SG_Q x SG_K subgroups
// of 16 lanes: subgroup (sq, sk) owns rows [sq * RPS, (sq + 1) * RPS) of the tile (RPS = BQ /
// SG_Q, MF = RPS / 8 fragments) and keys [sk * KS, (sk + 1) * KS) of every K block of BK keys
// (KS = BK / SG_K, NF = KS / 16 fragments), running its own online softmax over that share.
// Per K block: S [RPS, KS] = Q x K^T in BD slices -> scale by qscale = scale * log2(e) and mask
// -> online softmax with exp2 -> O [RPS, Dv] += P x V in VTILES splits of BV columns. After the
// K loop, combine() merges the SG_K partial (m, l, O) of the same rows through local memory.
//
// Local memory: Q of the tile [BQ][D] as T, staged once (joint_matrix loads need one row pitch;
// packed GQA rows have two), reused after the K loop as the combine buffer [BQ][DV / 2] fp32;
// then (SG_K > 1) the row (m, l) pairs [BQ][2]; then (policies with kUsesTailTile) one 16 x 16
// tile of T per subgroup for fragments crossing kv_len.
//
// Every fragment loop has a constexpr trip count and is marked XE2T_XMX_FRAGMENT_LOOP, which the
// policy header defines (fully unrolled for joint_matrix); the K-block loop is never unrolled.
// The joint_matrix program thus holds exactly MF * NF * (D + DV) / 16 multiply-adds:
// MF * NF * D / 16 for S, MF * NF * DV / 16 for P x V (the Python family's expected_matrix_mads).
#pragma once

#include "sdpa_mainloop.hpp"
#include "sdpa_xmx_fragment.hpp"

#ifndef XE2T_XMX_FRAGMENT_LOOP
#error "include a tile-ops policy header (it defines XE2T_XMX_FRAGMENT_LOOP) before the mainloop"
#endif

namespace xe2t::xmx {

// Dispatch tag of the mainloop specialization (SYCL*TLA's XeDefault<Stages>): K/V blocks are
// prefetched Stages blocks ahead.
template <int Stages>
struct XeDefault {};

// The compile-time shape of one instantiation; the static_asserts mirror the Python family's
// invalid_reason (kernels/_xmx_family.py).
template <class T_, int D_, int BQ_, int BK_, int BD_, int BV_, int SGQ_, int SGK_>
struct Shape {
  using T = T_;
  static constexpr int D = D_, DV = D_, BQ = BQ_, BK = BK_, BD = BD_, BV = BV_;
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
  static_assert(sizeof(T) == 2, "the xmx family serves fp16 and bf16 only");

  // Register footprint of one subgroup in 64-byte registers: Q [RPS, BD] as T, S [RPS, KS]
  // fp32, P [RPS, KS] as T, O [RPS, DV] fp32.
  static constexpr int regs(int bytes) { return (bytes + 63) / 64; }
  static constexpr int REGISTERS = regs(RPS * BD * 2) + regs(RPS * KS * 4) + regs(RPS * KS * 2) +
                                   regs(RPS * DV * 4);
};

template <class Dispatch, class Ops, class S>
struct XmxMainloop {
  static_assert(sizeof(Dispatch) == 0, "no xmx mainloop specialization for this dispatch policy");
};

template <int Stages, class Ops, class S>
struct XmxMainloop<XeDefault<Stages>, Ops, S> {
  using T = typename S::T;
  static constexpr int MF = S::MF, NF = S::NF, NDV = S::DV / kN, D = S::D, DV = S::DV;
  static constexpr auto kLocal = sycl::access::address_space::local_space;
  static_assert(Stages >= 0, "Stages is a prefetch distance >= 0");

  static constexpr int Q_BYTES = S::BQ * D * 2;
  static constexpr int ML_BYTES = S::SGK > 1 ? S::BQ * 2 * 4 : 0;
  static constexpr int TAIL_ELEMS = kN * kK;
  static constexpr int TAIL_BYTES = Ops::kUsesTailTile ? S::NSG * TAIL_ELEMS * 2 : 0;
  static constexpr int LOCAL_FLOATS = (Q_BYTES + ML_BYTES + TAIL_BYTES) / 4;

  // The (batch, KV head) slice: Q row R of the packed rows, K and V.
  struct Slice {
    const T *q;  // Q[b, 0, hkv * G, 0]
    Rows<T> k;
    Rows<T> v;
    const Geometry *g;

    static Slice of(const T *q, const T *k, const T *v, const Geometry &g, int b, int hkv) {
      const size_t q_off = (static_cast<size_t>(b) * g.q_len * g.heads_q + hkv * g.group) * D;
      const size_t kv_off = (static_cast<size_t>(b) * g.kv_len * g.heads_kv + hkv) * D;
      const size_t pitch = static_cast<size_t>(g.heads_kv) * D;
      return {q + q_off, {k + kv_off, pitch, g.kv_len}, {v + kv_off, pitch, g.kv_len}, &g};
    }
    const T *q_row(int row) const {
      return q + (static_cast<size_t>(row / g->group) * g->heads_q + row % g->group) * D;
    }
  };

  // The local memory of one work-group, carved as described at the top.
  struct Smem {
    T *q;        // [BQ][D]
    float *comb; // [BQ][CW], aliasing q after the K loop
    float *ml;   // [BQ][2]
    T *tail;     // this subgroup's 16 x 16 tile
    static Smem of(float *base, int sgid) {
      char *bytes = reinterpret_cast<char *>(base);
      return {reinterpret_cast<T *>(bytes), base, reinterpret_cast<float *>(bytes + Q_BYTES),
              reinterpret_cast<T *>(bytes + Q_BYTES + ML_BYTES) + sgid * TAIL_ELEMS};
    }
  };

  // The state of one subgroup: O [RPS, DV] unnormalized, row max (log2 domain) and row sum.
  struct State {
    typename Ops::Acc o[MF][NDV];
    float m[MF][kM];
    float l[MF][kM];
  };

  // One past the last K block any row up to last_row may see (0 when none sees a key).
  static int block_end(const Geometry &g, int last_row) {
    const int last = sycl::min(g.last_key(last_row), g.kv_len - 1);
    return last < 0 ? 0 : last / S::BK + 1;
  }

  // Work-group cooperative copy of rows [row0, row0 + BQ) of Q into local memory (padding rows
  // past the slice's rows are 0). fp16/bf16 move as raw 16-bit words. Callers barrier after it.
  static void stage_q(const Slice &s, int row0, T *q, int tid, int nt) {
    auto *dst = reinterpret_cast<std::uint16_t *>(q);
    for (int i = tid; i < S::BQ * D; i += nt) {
      const int row = row0 + i / D;
      dst[i] = row < s.g->rows()
                   ? reinterpret_cast<const std::uint16_t *>(s.q_row(row))[i % D]
                   : std::uint16_t{0};
    }
  }

  // The subgroup's K and V share of block kb, if wholly inside kv_len (a hint: tails skip it).
  static void prefetch_block(sycl::sub_group sg, const Slice &s, int kb, int sk) {
    const int key0 = kb * S::BK + sk * S::KS;
    if (key0 + S::KS > s.k.rows) return;
    XE2T_XMX_FRAGMENT_LOOP
    for (int j = 0; j < S::KS; j += kN)
      XE2T_XMX_FRAGMENT_LOOP
      for (int d = 0; d < D; d += 2 * kK) {
        Ops::template prefetch<kN, 2 * kK>(sg, s.k.row(key0 + j) + d, s.k.stride);
        Ops::template prefetch<kN, 2 * kK>(sg, s.v.row(key0 + j) + d, s.v.stride);
      }
  }

  // K blocks [kb0, kb1) for subgroup (sq, sk) of the tile whose first row is tile_row0, with
  // the tile's Q staged in sm. No barriers: subgroups leave the loop independently.
  static void run(sycl::sub_group sg, const Slice &s, const Smem &sm, int tile_row0, int sq,
                  int sk, int kb0, int kb1, State &st) {
    const Geometry &g = *s.g;
    int last[MF][kM];  // last key each row sees; -1 for padding rows
    int last_max = -1;
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int r = 0; r < kM; ++r) {
        const int row = tile_row0 + sq * S::RPS + mf * kM + r;
        last[mf][r] = row < g.rows() ? sycl::min(g.last_key(row), g.kv_len - 1) : -1;
        last_max = sycl::max(last_max, last[mf][r]);
        st.m[mf][r] = kNegInf;
        st.l[mf][r] = 0.0f;
      }
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int n = 0; n < NDV; ++n) Ops::fill(sg, st.o[mf][n], 0.0f);
    const T *qs = sm.q + static_cast<size_t>(sq) * S::RPS * D;
    for (int kb = kb0; kb < sycl::min(kb0 + Stages, kb1); ++kb) prefetch_block(sg, s, kb, sk);
#pragma unroll 1
    for (int kb = kb0; kb < kb1; ++kb) {
      const int key0 = kb * S::BK + sk * S::KS;
      // Keys ascend with kb: once past every key of the rows, all later blocks are too.
      if (key0 > last_max) break;
      if (Stages > 0 && kb + Stages < kb1) prefetch_block(sg, s, kb + Stages, sk);
      block(sg, s, sm.tail, qs, key0, last, st);
    }
  }

  // One K block: S = Q K^T, mask, online softmax, O = alpha O + P V.
  static void block(sycl::sub_group sg, const Slice &s, T *tail, const T *qs, int key0,
                    const int (&last)[MF][kM], State &st) {
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
          Ops::load_a(sg, qa[mf][kk], qs + mf * kM * D + d0 + kk * kK, D);
      XE2T_XMX_FRAGMENT_LOOP
      for (int kk = 0; kk < S::BD / kK; ++kk)
        XE2T_XMX_FRAGMENT_LOOP
        for (int nf = 0; nf < NF; ++nf) {
          typename Ops::BT kt;
          Ops::load_kt(sg, kt, s.k, key0 + nf * kN, d0 + kk * kK, tail);
          XE2T_XMX_FRAGMENT_LOOP
          for (int mf = 0; mf < MF; ++mf) Ops::mad(sg, sc[mf][nf], qa[mf][kk], kt);
        }
    }

    const float qscale = s.g->qscale;
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf)
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf)
        Ops::apply(sg, sc[mf][nf], [&](float &x, int r, int c) {
          x = key0 + nf * kN + c <= last[mf][r] ? x * qscale : kNegInf;
        });

    float alpha[MF][kM];
    float m_sub[MF][kM];
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf) {
      float bm[kM];
      XE2T_XMX_FRAGMENT_LOOP
      for (int r = 0; r < kM; ++r) bm[r] = kNegInf;
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf) Ops::row_max(sg, sc[mf][nf], bm);
      XE2T_XMX_FRAGMENT_LOOP
      for (int r = 0; r < kM; ++r) {
        const float m_new =
            sycl::fmax(st.m[mf][r], sycl::reduce_over_group(sg, bm[r], sycl::maximum<float>()));
        // A row that has seen only masked keys keeps m = -inf: subtract 0 so exp2 gives 0.
        m_sub[mf][r] = m_new == kNegInf ? 0.0f : m_new;
        alpha[mf][r] = sycl::exp2(st.m[mf][r] - m_sub[mf][r]);
        st.m[mf][r] = m_new;
      }
    }
    typename Ops::A p[MF][NF];
    XE2T_XMX_FRAGMENT_LOOP
    for (int mf = 0; mf < MF; ++mf) {
      float bs[kM];
      XE2T_XMX_FRAGMENT_LOOP
      for (int r = 0; r < kM; ++r) bs[r] = 0.0f;
      XE2T_XMX_FRAGMENT_LOOP
      for (int nf = 0; nf < NF; ++nf) {
        Ops::apply(sg, sc[mf][nf],
                   [&](float &x, int r, int) { x = sycl::exp2(x - m_sub[mf][r]); });
        Ops::row_sum(sg, sc[mf][nf], bs);
        Ops::to_a(sg, sc[mf][nf], p[mf][nf]);
      }
      XE2T_XMX_FRAGMENT_LOOP
      for (int r = 0; r < kM; ++r)
        st.l[mf][r] = st.l[mf][r] * alpha[mf][r] +
                      sycl::reduce_over_group(sg, bs[r], sycl::plus<float>());
      XE2T_XMX_FRAGMENT_LOOP
      for (int n = 0; n < NDV; ++n)
        Ops::apply(sg, st.o[mf][n], [&](float &x, int r, int) { x *= alpha[mf][r]; });
    }

    XE2T_XMX_FRAGMENT_LOOP
    for (int vv = 0; vv < S::VTILES; ++vv)
      XE2T_XMX_FRAGMENT_LOOP
      for (int nn = 0; nn < S::BV / kN; ++nn)
        XE2T_XMX_FRAGMENT_LOOP
        for (int nf = 0; nf < NF; ++nf) {
          typename Ops::B vb;
          Ops::load_v(sg, vb, s.v, key0 + nf * kK, vv * S::BV + nn * kN, tail);
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
      float a0[MF][kM];
      float a1[MF][kM];
      for (int s = 1; s < S::SGK; ++s) {
        XE2T_XMX_FRAGMENT_LOOP
        for (int c = 0; c < kChunks; ++c) {
          sycl::group_barrier(wg);  // the K loop (Q reads) or the previous merge is done
          if (sk == s) {
            if (c == 0 && sg.get_local_linear_id() == 0) {
              XE2T_XMX_FRAGMENT_LOOP
              for (int mf = 0; mf < MF; ++mf)
                XE2T_XMX_FRAGMENT_LOOP
                for (int r = 0; r < kM; ++r) {
                  sm.ml[(lrow0 + mf * kM + r) * 2] = st.m[mf][r];
                  sm.ml[(lrow0 + mf * kM + r) * 2 + 1] = st.l[mf][r];
                }
            }
            XE2T_XMX_FRAGMENT_LOOP
            for (int mf = 0; mf < MF; ++mf)
              XE2T_XMX_FRAGMENT_LOOP
              for (int n = 0; n < kChunkFrags; ++n)
                Ops::template store<kLocal>(sg, st.o[mf][c * kChunkFrags + n],
                                            sm.comb + (lrow0 + mf * kM) * S::CW + n * kN, S::CW);
          }
          sycl::group_barrier(wg);
          if (sk != 0) continue;
          if (c == 0) {
            XE2T_XMX_FRAGMENT_LOOP
            for (int mf = 0; mf < MF; ++mf)
              XE2T_XMX_FRAGMENT_LOOP
              for (int r = 0; r < kM; ++r) {
                const float mo = sm.ml[(lrow0 + mf * kM + r) * 2];
                const float lo = sm.ml[(lrow0 + mf * kM + r) * 2 + 1];
                const float m_new = sycl::fmax(st.m[mf][r], mo);
                const float m_sub = m_new == kNegInf ? 0.0f : m_new;
                a0[mf][r] = sycl::exp2(st.m[mf][r] - m_sub);
                a1[mf][r] = sycl::exp2(mo - m_sub);
                st.l[mf][r] = a0[mf][r] * st.l[mf][r] + a1[mf][r] * lo;
                st.m[mf][r] = m_new;
              }
          }
          XE2T_XMX_FRAGMENT_LOOP
          for (int mf = 0; mf < MF; ++mf)
            XE2T_XMX_FRAGMENT_LOOP
            for (int n = 0; n < kChunkFrags; ++n) {
              const float *in = sm.comb + (lrow0 + mf * kM) * S::CW + n * kN;
              Ops::apply(sg, st.o[mf][c * kChunkFrags + n], [&](float &x, int r, int col) {
                x = a0[mf][r] * x + a1[mf][r] * in[r * S::CW + col];
              });
            }
        }
      }
    }
  }
};

}  // namespace xe2t::xmx
