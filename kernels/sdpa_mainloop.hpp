// The SDPA forward mainloop shared by the prefill and decode kernels (seed 000 structure):
// for each K block: S [BQ, BK] = Q [BQ, D] x K^T in BD slices -> mask -> online softmax (exp2,
// Q pre-scaled by scale * log2(e)) -> O [BQ, Dv] += P x V in VTILES splits of BV columns; the
// global K/V rows of block kb + STAGES are prefetched while block kb is computed. The attention
// matrix is never materialized.
//
// Rows: the GQA group of one KV head is packed into the row dimension, row R = q * G + g for
// query position q and query head hkv * G + g, so a work-group reads each K/V block once for
// all G query heads. A work-group owns BQ rows; each of its NT = BQ / TM work-items owns TM rows
// (a register micro-tile of S [TM, BK] and O [TM, BV] per V split).
//
// KV_STAGE picks the tile layout: 1 = K^T and V blocks are copied (as fp32) into work-group
// local memory and S is built as outer products with lanes spanning keys; 2 = the same fp32
// tiles, packed once per launch into global memory by a pack kernel (no copy per work-group, no
// barriers, contiguous reads); 0 = each work-item reads K and V in place and S is built as dot
// products with lanes spanning head dims.
#pragma once

#include "sdpa_tile_ops.hpp"

// 1: several KV heads read in place prefetch in shares of every head's rows (Ahead::kShares)
// whatever K/V's element size; 0 (the MHA kernels as they were): only one-byte K/V do. The
// decode family's prefetch_shares knob; which is faster depends on the machine (below).
#ifndef XE2T_PREFETCH_SHARES
#define XE2T_PREFETCH_SHARES 0
#endif

namespace xe2t {

// Run-time shape of one (batch, KV head) slice.
struct Geometry {
  int q_len;
  int kv_len;
  int heads_q;
  int heads_kv;
  int group;      // heads_q / heads_kv
  int causal;     // 1: bottom-right aligned causal mask
  float qscale;   // softmax scale * log2(e)

  int rows() const { return q_len * group; }
  // Last key row R may see (bottom-right causal: query q sees keys 0 .. q + kv_len - q_len).
  int last_key(int row) const {
    return causal ? row / group + kv_len - q_len : kv_len - 1;
  }
};

// The largest divisor c of n (vectors or keys per row of an accumulator tile) such that the
// rows x c accumulators, the c operands loaded for them and row_operands live values of the
// other side fit in budget vector registers.
constexpr int register_tile(int n, int rows, int row_operands, int budget) {
  int best = 1;
  for (int c = 1; c <= n; ++c)
    if (n % c == 0 && rows * c + c + row_operands <= budget) best = c;
  return best;
}

// A variant's operands: T of the mainloop names Q/O's element type for MHA/GQA (K and V in T,
// Dv = D, loaded by the tile ops); a KvVariant instead (latent attention: Dv != D; FP8 K/V) names
// K/V's element type, the V columns one work-group computes (DV_), the loader that turns K/V
// elements into fp32 vectors (the vector-lane mainloop's; the xmx family reads the shape alone,
// its tile ops load) and V's row length (DV_ROW_: Dv; more than DV_ when the xmx decode splits
// Dv among work-groups). Kept out of the MHA instantiation on purpose: its type, and so its
// code, stays what it was.
template <class Q_, class KV_, int DV_, template <int> class Loader_, int DV_ROW_ = DV_>
struct KvVariant {};

template <class T, int D>
struct Operands {
  using Q = T;
  using KV = T;
  static constexpr int DV = D;
  static constexpr int DV_ROW = D;
  template <int W>
  using Loader = VecTileOps<W>;
};

template <class Q_, class KV_, int DV_, template <int> class Loader_, int DV_ROW_, int D>
struct Operands<KvVariant<Q_, KV_, DV_, Loader_, DV_ROW_>, D> {
  using Q = Q_;
  using KV = KV_;
  static constexpr int DV = DV_;
  static constexpr int DV_ROW = DV_ROW_;
  static_assert(DV_ROW_ % DV_ == 0, "a work-group computes a whole 1 / n of V's columns");
  template <int W>
  using Loader = Loader_<W>;
};

// VREGS: how many W-lane vectors the device's register file holds (16 on AVX2, 32 on AVX-512
// with W = 16); it sizes the accumulator micro-tiles.
template <class T, int D, int BQ, int BK, int BD, int BV, int STAGES, int W, int TM, int KV_STAGE,
          int VREGS>
struct SdpaMainloop {
  using Q = typename Operands<T, D>::Q;    // Q and O elements
  using KV = typename Operands<T, D>::KV;  // K and V elements
  static constexpr int DV = Operands<T, D>::DV;
  static constexpr int VTILES = DV / BV;
  static constexpr int NT = BQ / TM;
  static constexpr int NVK = BK / W;  // vectors per S row
  static constexpr int NVV = BV / W;  // vectors per O split row
  // Register tiles of the S product, NC vectors of keys (staged: one broadcast Q scalar live) or
  // KC keys (in place: TM Q vectors live) per row, sized to the register file whatever BK is.
  static constexpr int NC = register_tile(NVK, TM, 1, VREGS);
  static constexpr int KC = register_tile(BK, TM, TM, VREGS);
  static constexpr int TILE_FLOATS = D * BK + BK * DV;  // one block's K^T [D][BK], V [BK][DV]
  static constexpr int LOCAL_FLOATS = KV_STAGE == 1 ? TILE_FLOATS : 1;

  static_assert(D % BD == 0, "BD must divide the head dim");
  static_assert(BD % W == 0, "SG_SIZE must divide BD");
  static_assert(BK % W == 0, "SG_SIZE must divide BK");
  static_assert(BV % W == 0, "SG_SIZE must divide BV");
  static_assert(DV % BV == 0, "BV must divide the V head dim (VTILES = Dv / BV)");
  static_assert(Operands<T, D>::DV_ROW == DV, "the vector-lane kernels compute all of V's columns");
  static_assert(BQ % TM == 0, "rows per work-item (TM) must divide BQ");
  static_assert(STAGES >= 0, "STAGES is a prefetch distance >= 0");
  static_assert(KV_STAGE >= 0 && KV_STAGE <= 2, "KV_STAGE is 0, 1 or 2");

  using Ops = VecTileOps<W>;
  using Load = typename Operands<T, D>::template Loader<W>;  // K/V elements -> fp32 vectors
  using vec = typename Ops::vec;
  // Variants read each slice's Q scale from its own geometry (FP8 K/V: the KV head's K scale
  // folded in); MHA/GQA slices share one.
  static constexpr bool kHeadQscale = !std::is_same_v<T, Q>;

  // One past the last K block any row up to last_row may see (0 when none sees a key).
  static int block_end(const Geometry &g, int last_row) {
    const int nkb = (g.kv_len + BK - 1) / BK;
    const int last = sycl::min(g.last_key(last_row), g.kv_len - 1);
    return last < 0 ? 0 : sycl::min(nkb, last / BK + 1);
  }

  static int blocks(const Geometry &g) { return (g.kv_len + BK - 1) / BK; }

  // Pointers to the (batch, KV head) slice: Q row R, key j and packed block kb.
  struct Slice {
    const Q *q;   // Q[b, 0, hkv * G, 0]
    const KV *k;  // K[b, 0, hkv, 0]
    const KV *v;  // V[b, 0, hkv, 0]
    const Geometry *g;
    float *tiles;  // packed [B, Hkv, blocks, TILE_FLOATS] (KV_STAGE 2), else null

    // The slice of batch b, KV head hkv in tensors Q [B, q_len, Hq, D], K [B, kv_len, Hkv, D],
    // V [B, kv_len, Hkv, Dv] and, when given, packed tiles.
    static Slice of(const Q *q, const KV *k, const KV *v, const Geometry &g, int b, int hkv,
                    float *tiles = nullptr) {
      const size_t q_off = (static_cast<size_t>(b) * g.q_len * g.heads_q + hkv * g.group) * D;
      const size_t kv_off = (static_cast<size_t>(b) * g.kv_len * g.heads_kv + hkv) * D;
      // A constant condition: MHA code is exactly the offset it always was.
      const size_t v_off =
          DV == D ? kv_off : (static_cast<size_t>(b) * g.kv_len * g.heads_kv + hkv) * DV;
      const size_t tile_off =
          (static_cast<size_t>(b) * g.heads_kv + hkv) * blocks(g) * TILE_FLOATS;
      return {q + q_off, k + kv_off, v + v_off, &g, tiles ? tiles + tile_off : nullptr};
    }

    float *tile(int kb) const { return tiles + static_cast<size_t>(kb) * TILE_FLOATS; }

    const Q *q_row(int row) const {
      return q + (static_cast<size_t>(row / g->group) * g->heads_q + row % g->group) * D;
    }
    // Offset of row R's O row in O, for Q starting at q_base: O has Q's layout, Dv columns.
    std::ptrdiff_t o_offset(const Q *q_base, int row) const {
      if constexpr (DV == D) {
        return q_row(row) - q_base;
      } else {
        return (q_row(row) - q_base) / D * DV;
      }
    }
    // Keys past the end are clamped to the last one: always a valid read, always masked.
    const KV *k_row(int key) const {
      return k + static_cast<size_t>(sycl::min(key, g->kv_len - 1)) * g->heads_kv * D;
    }
    const KV *v_row(int key) const {
      return v + static_cast<size_t>(sycl::min(key, g->kv_len - 1)) * g->heads_kv * DV;
    }
  };

  // Per-work-item state: the TM rows' unnormalized O, running max (log2 domain) and sum.
  struct State {
    alignas(64) float o[TM][DV];
    float m[TM];
    float l[TM];
  };

  // One prefetch per 64-byte line: the CPU runtime's ranged prefetch brings in less than the
  // range (measured: fp32 prefill with per-line prefetches 7-11 % faster, fp16 unchanged).
  static void prefetch_lines(const void *p, int bytes) {
    const char *c = static_cast<const char *>(p);
    for (int b = 0; b < bytes; b += 64) sycl::ext::oneapi::experimental::prefetch(c + b, 64);
  }

  static void prefetch_key(const Slice &s, int key) {
    if (key < s.g->kv_len) {
      prefetch_lines(s.k_row(key), D * sizeof(KV));
      prefetch_lines(s.v_row(key), DV * sizeof(KV));
    }
  }

  // How the in-place path prefetches the K and V rows STAGES blocks ahead.
  enum class Ahead {
    kRows,   // one head: each score step its keys' K and V rows, a call per line
    kVByPv,  // several heads: K rows by the score steps, V lines by the P x V splits
    // Several heads, one-byte (FP8) K/V, or any with XE2T_PREFETCH_SHARES: shares of every
    // head's rows (prefetch_share), K's by the score steps and V's by the P x V splits.
    // Measured cold (decode hd128 32/8, kv 16384): e4m3 7-8 % faster than kVByPv; fp16 5-11 %
    // slower on a Zen 5 EPYC and a Xeon (twice the lines per share, issued back to back) but
    // 26 % faster on a Zen 2 EPYC (AVX2), so for 2-byte K/V it is the tuner's choice.
    kShares,
  };

  // Share `part` of `parts` of the lines holding the K rows (kV false) or V rows of keys
  // [key, key + n) of the HB heads from s0 on. One key's HB rows are adjacent ([kv_len, Hkv, D]
  // layout), so a share is one or two ranged prefetches instead of a call per row and line.
  template <int HB, bool kV>
  static void prefetch_share(const Slice &s0, int key, int n, int part, int parts) {
    constexpr long kSpan = static_cast<long>(HB) * (kV ? DV : D) * sizeof(KV);
    n = sycl::min(n, s0.g->kv_len - key);
    if (n <= 0) return;
    const long lines = (n * kSpan + 63) / 64;
    const long lo = lines * part / parts * 64;
    const long hi = sycl::min(lines * (part + 1) / parts * 64, n * kSpan);
    for (long c = lo / kSpan; c * kSpan < hi; ++c) {
      const long from = sycl::max(lo, c * kSpan) - c * kSpan;
      const long to = sycl::min(hi, (c + 1) * kSpan) - c * kSpan;
      const char *span =
          reinterpret_cast<const char *>(kV ? s0.v_row(key + c) : s0.k_row(key + c));
      sycl::ext::oneapi::experimental::prefetch(span + from, to - from);
    }
  }

  // Item t's share of block kb: its K/V rows, or of the packed tile (KV_STAGE 2).
  static void prefetch_block(const Slice &s, int kb, int t) {
    if constexpr (KV_STAGE == 2) {
      constexpr int kShare = (TILE_FLOATS + NT - 1) / NT;
      const int first = t * kShare;
      if (first < TILE_FLOATS)
        prefetch_lines(s.tile(kb) + first, sycl::min(kShare, TILE_FLOATS - first) * sizeof(float));
    } else {
      for (int j = t; j < BK; j += NT) prefetch_key(s, kb * BK + j);
    }
  }

  // Copy K block kb transposed ([D][BK]) and V block ([BK][DV]) into a tile as fp32, item t of
  // nt sharing the work. K goes W keys at a time, each W x W tile transposed in registers, so
  // every store to the tile is a whole vector.
  static void stage(const Slice &s, int kb, int t, int nt, float *tile) {
    float *kt = tile;
    float *vl = tile + D * BK;
    for (int j0 = t * W; j0 < BK; j0 += nt * W) {
      const KV *kr[W];
#pragma unroll
      for (int w = 0; w < W; ++w) kr[w] = s.k_row(kb * BK + j0 + w);
      for (int d = 0; d < D; d += W) {
        vec tile[W];
#pragma unroll
        for (int w = 0; w < W; ++w) tile[w] = Load::load(kr[w] + d);
        Ops::transpose(tile);
#pragma unroll
        for (int w = 0; w < W; ++w) Ops::store(kt + (d + w) * BK + j0, tile[w]);
      }
    }
    for (int j = t; j < BK; j += nt) {
      const KV *vr = s.v_row(kb * BK + j);
      for (int d = 0; d < DV; d += W) Ops::store(vl + j * DV + d, Load::load(vr + d));
    }
  }

  // S = Q . K block into p, with lanes spanning keys (K^T staged in local memory).
  static void scores_staged(float (&p)[TM][BK], const float (&qs)[TM][D], const float *kt) {
    for (int c0 = 0; c0 < NVK; c0 += NC) {
      vec acc[TM][NC];
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[r][c] = vec(0.0f);
      for (int d0 = 0; d0 < D; d0 += BD) {
#pragma unroll
        for (int dd = 0; dd < BD; ++dd) {
          const int d = d0 + dd;
          vec kv[NC];
#pragma unroll
          for (int c = 0; c < NC; ++c) kv[c] = Ops::load(kt + d * BK + (c0 + c) * W);
          float a[TM];
#pragma unroll
          for (int r = 0; r < TM; ++r) a[r] = qs[r][d];
          Ops::mma_outer(acc, a, kv);
        }
      }
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < NC; ++c) Ops::store(&p[r][(c0 + c) * W], acc[r][c]);
    }
  }

  // S = Q . K for keys key0 + j0 .. + KC of one slice into p, lanes spanning head dims (K read
  // in place), prefetching as kAhead says. Always inlined: the one-head path then compiles to
  // exactly the code it had before the key-major path existed
  // (tests/kernels/test_kv_variant_isolation.py compares the SPIR-V).
  template <Ahead kAhead>
  [[clang::always_inline]] static void scores_keys(float (&p)[TM][BK],
                                                   const float (&qs)[TM][D], const Slice &s,
                                                   int key0, int j0) {
    const KV *kr[KC];
#pragma unroll
    for (int c = 0; c < KC; ++c) kr[c] = s.k_row(key0 + j0 + c);
    if constexpr (STAGES > 0 && kAhead != Ahead::kShares) {
      // Keys STAGES blocks ahead, spread over the block rather than issued as one burst at
      // its start (the staged path keeps the burst, split among the work-group's items).
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        if constexpr (kAhead == Ahead::kVByPv) {
          const int key = key0 + j0 + c + STAGES * BK;
          if (key < s.g->kv_len) prefetch_lines(s.k_row(key), D * sizeof(KV));
        } else {
          prefetch_key(s, key0 + j0 + c + STAGES * BK);
        }
      }
    }
    vec acc[TM][KC];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
      for (int c = 0; c < KC; ++c) acc[r][c] = vec(0.0f);
    for (int d0 = 0; d0 < D; d0 += BD) {
#pragma unroll
      for (int dd = 0; dd < BD; dd += W) {
        vec kv[KC];
        vec qv[TM];
#pragma unroll
        for (int c = 0; c < KC; ++c) kv[c] = Load::load(kr[c] + d0 + dd);
#pragma unroll
        for (int r = 0; r < TM; ++r) qv[r] = Ops::load(&qs[r][d0 + dd]);
        Ops::mma_dot(acc, qv, kv);
      }
    }
    if constexpr ((TM * KC) % W == 0) {
#pragma unroll
      for (int g = 0; g < TM * KC; g += W) {
        vec group[W];
#pragma unroll
        for (int i = 0; i < W; ++i) group[i] = acc[(g + i) / KC][(g + i) % KC];
        const vec sums = Ops::reduce_sum_transposed(group);
#pragma unroll
        for (int i = 0; i < W; ++i) p[(g + i) / KC][j0 + (g + i) % KC] = sums[i];
      }
    } else {
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < KC; ++c) p[r][j0 + c] = Ops::reduce_sum(acc[r][c]);
    }
  }

  // S = Q . K block into p, with lanes spanning head dims (K read in place).
  static void scores_direct(float (&p)[TM][BK], const float (&qs)[TM][D], const Slice &s,
                            int key0) {
    for (int j0 = 0; j0 < BK; j0 += KC) scores_keys<Ahead::kRows>(p, qs, s, key0, j0);
  }

  // Sets S to -inf where key > last[r] (causal diagonal blocks and the kv tail): keys ascend,
  // so each row's masked keys are a tail of the block.
  static void mask(float (&p)[TM][BK], const int (&last)[TM], int key0) {
    for (int r = 0; r < TM; ++r)
      for (int j = sycl::max(0, last[r] - key0 + 1); j < BK; ++j) p[r][j] = kNegInf;
  }

  // Online softmax of the S block in p; leaves P in p and the O rescale factors in alpha.
  static void softmax(float (&p)[TM][BK], State &st, float (&alpha)[TM]) {
    float m_sub[TM];
    float shift[TM];  // log2 of alpha
    for (int r = 0; r < TM; ++r) {
      vec mx = Ops::load(&p[r][0]);
      for (int c = 1; c < NVK; ++c) mx = Ops::vmax(mx, Ops::load(&p[r][c * W]));
      const float m_new = Ops::smax(st.m[r], Ops::reduce_max(mx));
      // A row that has seen only masked keys keeps m = -inf; subtract 0 so exp2 gives 0, not NaN.
      m_sub[r] = m_new == kNegInf ? 0.0f : m_new;
      shift[r] = st.m[r] - m_sub[r];
      st.m[r] = m_new;
    }
    // The rows' rescale factors W at a time in one vector exp2 (the scalar sycl::exp2 is a
    // library call that spills the vector registers around it).
    for (int r0 = 0; r0 < TM; r0 += W) {
      vec x(0.0f);
      for (int i = 0; i < W && r0 + i < TM; ++i) x[i] = shift[r0 + i];
      const vec a = Ops::exp2(x);
      for (int i = 0; i < W && r0 + i < TM; ++i) alpha[r0 + i] = a[i];
    }
    for (int r = 0; r < TM; ++r) {
      vec sum(0.0f);
      for (int c = 0; c < NVK; ++c) {
        const vec e = Ops::exp2(Ops::load(&p[r][c * W]) - vec(m_sub[r]));
        sum += e;
        Ops::store(&p[r][c * W], e);
      }
      st.l[r] = st.l[r] * alpha[r] + Ops::reduce_sum(sum);
    }
  }

  // O[:, vv * BV : (vv + 1) * BV] = alpha * O + P x V, for each of the VTILES splits, each
  // split first prefetching the V lines kAhead gives it (head h of the HB from s0 on).
  template <Ahead kAhead, int HB = 1>
  static void accumulate_pv(State &st, const float (&alpha)[TM], const float (&p)[TM][BK],
                            const Slice &s, int key0, const float *vl, const Slice &s0, int h) {
    // V rows read in place: their (clamped) addresses once per block, not once per split.
    [[maybe_unused]] const KV *rows[KV_STAGE ? 1 : BK];
    if constexpr (!KV_STAGE) {
      for (int j = 0; j < BK; ++j) rows[j] = s.v_row(key0 + j);
    }
#pragma unroll 1
    for (int vv = 0; vv < VTILES; ++vv) {
      // Before the split's accumulators are live (a prefetch is a call into the runtime that
      // clobbers every vector register), spread over the P x V work as K's are over the
      // scores, so memory is kept busy during both (V prefetched with K measured 10-20 %
      // slower: bursts of prefetches stall on the core's outstanding misses while P x V
      // issues none).
      if constexpr (kAhead == Ahead::kVByPv && STAGES > 0) {
        // A line is prefetched by the split whose columns start in it.
        constexpr int kBytes = BV * sizeof(KV);
        if ((vv * kBytes) % 64 < kBytes) {
          for (int j = 0; j < BK; ++j) {
            const int key = key0 + j + STAGES * BK;
            if (key < s.g->kv_len)
              prefetch_lines(s.v_row(key) + vv * BV, kBytes < 64 ? 64 : kBytes);
          }
        }
      } else if constexpr (kAhead == Ahead::kShares && STAGES > 0) {
        prefetch_share<HB, true>(s0, key0 + STAGES * BK, BK, h * VTILES + vv, HB * VTILES);
      }
      vec acc[TM][NVV];
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < NVV; ++c)
          acc[r][c] = Ops::load(&st.o[r][vv * BV + c * W]) * vec(alpha[r]);
#pragma unroll 4
      for (int j = 0; j < BK; ++j) {
        vec vr[NVV];
        if constexpr (KV_STAGE) {
#pragma unroll
          for (int c = 0; c < NVV; ++c) vr[c] = Ops::load(vl + j * DV + vv * BV + c * W);
        } else {
#pragma unroll
          for (int c = 0; c < NVV; ++c) vr[c] = Load::load(rows[j] + vv * BV + c * W);
        }
        float a[TM];
#pragma unroll
        for (int r = 0; r < TM; ++r) a[r] = p[r][j];
        Ops::mma_outer(acc, a, vr);
      }
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < NVV; ++c) Ops::store(&st.o[r][vv * BV + c * W], acc[r][c]);
    }
  }

  // Processes K blocks [kb0, kb1) for rows row0 .. row0 + TM - 1 of HB slices (HB KV heads of
  // one batch, same geometry): block kb of every head before block kb + 1 of any, so with all
  // KV heads in one work-group K and V are read in memory order (the [kv_len, Hkv, D] layout
  // puts one key's heads side by side) instead of one head's rows Hkv * D apart. With several
  // heads read in place (kKeyMajor) the scores go further: KC keys of every head before the next
  // KC keys of any, so K streams through in memory order, and V is prefetched by the P x V
  // product (Ahead). Every work-item of the work-group must call this with the same kb0, kb1
  // (the staged path has barriers).
  template <int HB>
  static void run(const Slice (&s)[HB], int row0, int t, int kb0, int kb1, float *local,
                  sycl::group<2> wg, State (&st)[HB]) {
    constexpr bool kKeyMajor = HB > 1 && KV_STAGE == 0;
    constexpr Ahead kAhead = !kKeyMajor ? Ahead::kRows
                             : sizeof(KV) == 1 || XE2T_PREFETCH_SHARES ? Ahead::kShares
                                                                        : Ahead::kVByPv;
    const Geometry &g = *s[0].g;
    alignas(64) float qs[HB][TM][D];
    int last[TM];
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      const int row = row0 + r;
      const bool valid = row < g.rows();
      last[r] = sycl::min(valid ? g.last_key(row) : g.kv_len - 1, g.kv_len - 1);
      for (int h = 0; h < HB; ++h) {
        const Q *qr = s[h].q_row(valid ? row : 0);
        for (int d = 0; d < D; d += W)
          Ops::store(&qs[h][r][d], valid ? Ops::load(qr + d) *
                                               vec(kHeadQscale ? s[h].g->qscale : g.qscale)
                                         : vec(0.0f));
        st[h].m[r] = kNegInf;
        st[h].l[r] = 0.0f;
        for (int d = 0; d < DV; d += W) Ops::store(&st[h].o[r][d], vec(0.0f));
      }
    }
    if constexpr (STAGES > 0) {
      for (int kb = kb0; kb < sycl::min(kb0 + STAGES, kb1); ++kb)
        for (int h = 0; h < HB; ++h) prefetch_block(s[h], kb, t);
    }
    for (int kb = kb0; kb < kb1; ++kb) {
      const int key0 = kb * BK;
      alignas(64) float p[kKeyMajor ? HB : 1][TM][BK];  // S of every head (key-major only)
      if constexpr (kKeyMajor) {
        if (key0 <= last[TM - 1]) {
#pragma unroll 1
          for (int j0 = 0; j0 < BK; j0 += KC)
#pragma unroll 1
            for (int h = 0; h < HB; ++h) {
              if constexpr (kAhead == Ahead::kShares && STAGES > 0)
                prefetch_share<HB, false>(s[0], key0 + j0 + STAGES * BK, KC, h, HB);
              scores_keys<kAhead>(p[h], qs[h], s[h], key0, j0);
            }
        }
      }
#pragma unroll 1
      for (int h = 0; h < HB; ++h) {
        const float *tile = local;
        if constexpr (KV_STAGE == 1) {
          sycl::group_barrier(wg);
          stage(s[h], kb, t, NT, local);
          sycl::group_barrier(wg);
        } else if constexpr (KV_STAGE == 2) {
          tile = s[h].tile(kb);
        }
        if constexpr (STAGES > 0 && KV_STAGE != 0) {
          if (kb + STAGES < kb1) prefetch_block(s[h], kb + STAGES, t);
        }
        // A block past all of this item's keys (causal: the work-group's diagonal beyond this
        // item's rows) only takes part in the staging above.
        if (key0 > last[TM - 1]) continue;
        // Rows ascend, so last[0] is the tightest limit: only diagonal and tail blocks mask.
        if constexpr (kKeyMajor) {
          if (key0 + BK - 1 > last[0]) mask(p[h], last, key0);
          float alpha[TM];
          softmax(p[h], st[h], alpha);
          accumulate_pv<kAhead, HB>(st[h], alpha, p[h], s[h], key0, nullptr, s[0], h);
        } else {
          alignas(64) float ph[TM][BK];
          if constexpr (KV_STAGE) {
            scores_staged(ph, qs[h], tile);
          } else {
            scores_direct(ph, qs[h], s[h], key0);
          }
          if (key0 + BK - 1 > last[0]) mask(ph, last, key0);
          float alpha[TM];
          softmax(ph, st[h], alpha);
          accumulate_pv<Ahead::kRows>(st[h], alpha, ph, s[h], key0, tile + D * BK, s[h], h);
        }
      }
    }
  }
};

}  // namespace xe2t
