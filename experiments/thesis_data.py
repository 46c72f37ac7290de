"""The thesis's numbers, as data: appendix A, tables A.1-A.8 of "Cluster Based Distributed State
Management of Network Function" (/work/shared/reference, chapter 6).

The thesis labels every throughput column "ms/pkt"; the values grow with the packet rate (A.4:
about 44 x the rate) and with the number of threads, so they are a rate (more is better), in a
unit the thesis does not give. Our throughput is in packets/s; the report sets the two side by
side with their ratio and compares shapes, not units.
"""

from __future__ import annotations

# A.1: latency (ms/pkt) against threads; 4,000 packets at 100 pkt/s, batch 30, one NF
A1_LATENCY_VS_THREADS: dict[int, float] = {1: 55.372, 2: 52.599, 3: 45.395, 4: 40.227, 5: 36.528}

# A.2: throughput against threads (same run)
A2_THROUGHPUT_VS_THREADS: dict[int, float] = {
    1: 424.5608, 2: 680.8253, 3: 742.922, 4: 810.796, 5: 815.686}

# A.3: throughput against batch size, 3 clusters x 4 NFs against 12 NFs without clusters;
# 4,000 packets at 100 pkt/s. batch -> (with clusters, without)
A3_THROUGHPUT_VS_BATCH: dict[int, tuple[float, float]] = {
    10: (3871.31978, 3420.3238), 20: (3775.057, 3551.51), 30: (3886.5038, 3590.37),
    40: (3898.136, 3645.6754), 50: (3803.9816, 3637.2304), 100: (3831.2319, 3800.7672)}

# A.4: throughput against packet rate (pkt/s), batch 30, same layouts. rate -> (with, without)
A4_THROUGHPUT_VS_RATE: dict[int, tuple[float, float]] = {
    25: (1081.4915, 1051.6907), 50: (2173.2047, 1988.6341), 100: (4408.8377, 4082.9092)}

# A.5-A.7: state information (bytes) per batch of NF-1, NF-2, NF-3; 2 clusters x 2 NFs, batch 30,
# 50 pkt/s; flow 1 moves NF-1 -> NF-2 (same cluster) at packet 68 and NF-2 -> NF-3 (other
# cluster) at packet 165. packet count -> bytes
MIGRATION_POINTS: tuple[int, ...] = (30, 60, 68, 98, 128, 158, 165, 195, 225)
A5_NF1: dict[int, int] = dict(zip(MIGRATION_POINTS, (3000, 3000, 800, 3000, 3000, 3000, 700, 0, 0),
                                  strict=True))
A6_NF2: dict[int, int] = dict(zip(MIGRATION_POINTS, (3000, 3000, 800, 3000, 3000, 3000, 700, 0, 0),
                                  strict=True))
A7_NF3: dict[int, int] = dict(zip(MIGRATION_POINTS, (0, 0, 0, 0, 0, 0, 16500, 3000, 3000),
                                  strict=True))
INTRA_MOVE_AT, INTER_MOVE_AT = 68, 165

# A.8: latency (ms/pkt) against packet rate with and without the load balancer, 3 clusters x 3
# NFs, 4,000 packets, batch 30. rate -> (with, without)
A8_LATENCY_VS_RATE_LB: dict[int, tuple[float, float]] = {
    25: (307.743, 583.2177), 50: (171.452, 291.975), 100: (142.386, 147.3667)}

TABLES: dict[str, str] = {
    "A.1": "Latency vs number of threads (ms/pkt)",
    "A.2": "Throughput vs number of threads",
    "A.3": "Throughput vs batch size, cluster vs no cluster",
    "A.4": "Throughput vs packet rate, cluster vs no cluster",
    "A.5": "Migration overhead, NF-1 (bytes per batch)",
    "A.6": "Migration overhead, NF-2 (bytes per batch)",
    "A.7": "Migration overhead, NF-3 (bytes per batch)",
    "A.8": "Latency vs packet rate with and without load balancing (ms/pkt)",
}
