"""PNGs for bench/thesis-ch6 (matplotlib, as scripts/setup.sh installs it into .venv):
thesis_fig6_1.png (IOPS after stabilization by personality and policy), thesis_fig6_2.png
(IOPS over time, round 1), thesis_fig6_3_6_4.png (flush order), thesis_fig6_6.png (ms_nfs
over time under write-back flush, ascending against LRU), thesis_fig6_7.png (dirty epochs)
and thesis_discard.png (ms_nfs-small with and without TRIM)."""

import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _med(results, key):
    v = [r["iops"] for r in results if r["key"] == key]
    return (statistics.median(v), min(v), max(v)) if v else (0, 0, 0)


def _bars(ax, groups, series, results, keyf, title):
    width = 0.8 / max(1, len(series))
    for i, (label, s) in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for g, name in enumerate(groups):
            m, a, b = _med(results, keyf(name, s))
            xs.append(g + i * width)
            ys.append(m)
            lo.append(m - a)
            hi.append(b - m)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=label)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel("IOPS (median, bars: min..max)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def draw(results, personalities, policies, out):
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=80)
    _bars(ax, personalities, [(p, p) for p in policies], results,
          lambda n, s: "%s|%s" % (n, s), "Figure 6.1 on ember: IOPS after stabilization")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "thesis_fig6_1.png"))
    plt.close(fig)

    fig, axes = plt.subplots(1, len(personalities), figsize=(3.2 * len(personalities), 3.5),
                             dpi=80, squeeze=False)
    for ax, pers in zip(axes[0], personalities):
        for pol in policies:
            rr = [r for r in results if r["key"] == "%s|%s" % (pers, pol) and r["round"] == 1]
            if rr:
                ax.plot(range(1, len(rr[0]["series"]) + 1), rr[0]["series"], label=pol)
        ax.set_title(pers, fontsize=9)
        ax.set_xlabel("seconds (1 s intervals; thesis: 30 s)", fontsize=7)
    axes[0][0].set_ylabel("IOPS")
    axes[0][-1].legend(fontsize=6)
    fig.suptitle("Figure 6.2 on ember: IOPS over time (round 1)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "thesis_fig6_2.png"))
    plt.close(fig)

    if any(r["fig"] == "6.3/6.4" for r in results):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=80)
        for ax, pol, n in zip(axes, ("write-back-persist", "write-back-flush"), ("6.3", "6.4")):
            _bars(ax, personalities, [("ascending", ""), ("lru", ",flush_order=lru")], results,
                  lambda name, s, pol=pol: "%s|%s%s" % (name, pol, s),
                  "Figure %s on ember: %s, flush order" % (n, pol))
        fig.tight_layout()
        fig.savefig(os.path.join(out, "thesis_fig6_3_6_4.png"))
        plt.close(fig)
        if "ms_nfs" in personalities:
            fig, ax = plt.subplots(figsize=(6, 3.5), dpi=80)
            for label, k in (("ascending", "ms_nfs|write-back-flush"),
                             ("lru", "ms_nfs|write-back-flush,flush_order=lru")):
                rr = [r for r in results if r["key"] == k and r["round"] == 1]
                if rr:
                    ax.plot(range(1, len(rr[0]["series"]) + 1), rr[0]["series"], label=label)
            ax.set_xlabel("seconds")
            ax.set_ylabel("IOPS")
            ax.set_title("Figure 6.6 on ember: ms_nfs, write-back flush, over time", fontsize=10)
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(out, "thesis_fig6_6.png"))
            plt.close(fig)

    if any(r["fig"] == "6.7" for r in results):
        fig, ax = plt.subplots(figsize=(8, 4), dpi=80)
        _bars(ax, personalities, [("1 epoch", ",max_epochs=1"), ("2 epochs", ",max_epochs=2"),
                                  ("4 epochs", "")], results,
              lambda n, s: "%s|write-back-flush%s" % (n, s),
              "Figure 6.7 on ember: write-back flush by maximum dirty epochs")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "thesis_fig6_7.png"))
        plt.close(fig)

    if any(r["fig"] == "discard" for r in results):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=80)
        pols = ("write-back-flush", "write-back-persist")
        _bars(axes[0], pols, [("ext4 default", "False"), ("ext4 -o discard", "True")], results,
              lambda p, s: "ms_nfs-small|%s,discard=%s,long=True" % (p, s),
              "ms_nfs-small: IOPS after stabilization, with and without TRIM")
        for pol in pols:
            for d in (False, True):
                k = "ms_nfs-small|%s,discard=%s,long=True" % (pol, d)
                rr = [r for r in results if r["key"] == k and r["round"] == 1]
                if rr:
                    axes[1].plot(range(1, len(rr[0]["series"]) + 1), rr[0]["series"],
                                 label="%s%s" % (pol, ", discard" if d else ""),
                                 linestyle="-" if d else "--")
        axes[1].set_xlabel("seconds (round 1)")
        axes[1].set_ylabel("IOPS")
        axes[1].set_title("ms_nfs-small over time", fontsize=10)
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "thesis_discard.png"))
        plt.close(fig)
