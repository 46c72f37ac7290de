/*
 * nfcluster data plane: incremental ones'-complement checksum updates (RFC 1624, eqn. 3),
 * target-neutral plain arithmetic that p4c's front end, BMv2 and p4sim all accept.
 *
 * The hand-off control (include/control/handoff.p4) rewrites a TCP connection's addresses and
 * ports; the IPv4 header checksum covers the addresses, the TCP checksum covers them (through
 * the pseudo-header) and the ports. Rather than recomputing over the payload, both are updated
 * from the old and new 16-bit words: HC' = ~(~HC + sum(~m) + sum(m')). A word that did not
 * change contributes ~m + m = 0xffff, ones'-complement zero, so the functions take the whole
 * 4-tuple before and after and need no knowledge of which fields an action rewrote.
 */
#ifndef NFC_CHECKSUM_P4
#define NFC_CHECKSUM_P4

/* The 16-bit ones'-complement sum of `~old + new` for one 32-bit field (two 16-bit words). */
bit<32> csum16_delta32(in bit<32> old_value, in bit<32> new_value) {
    bit<32> old_hi = (bit<32>)(~old_value[31:16]);
    bit<32> old_lo = (bit<32>)(~old_value[15:0]);
    return old_hi + old_lo + (bit<32>)new_value[31:16] + (bit<32>)new_value[15:0];
}

/* Fold a 32-bit accumulator into 16 bits with end-around carry (twice: the first fold can carry). */
bit<16> csum16_fold(in bit<32> sum) {
    bit<32> once = (sum & 0xffff) + (sum >> 16);
    bit<32> twice = (once & 0xffff) + (once >> 16);
    return (bit<16>)twice;
}

/* The IPv4 header checksum after the addresses changed from (old_src, old_dst) to (src, dst). */
bit<16> ipv4_checksum_update(in bit<16> checksum,
                             in bit<32> old_src, in bit<32> old_dst,
                             in bit<32> src, in bit<32> dst) {
    bit<32> sum = (bit<32>)(~checksum) + csum16_delta32(old_src, src) + csum16_delta32(old_dst, dst);
    return ~csum16_fold(sum);
}

/* The TCP checksum after the 4-tuple changed (the pseudo-header's addresses and the ports). */
bit<16> tcp_checksum_update(in bit<16> checksum,
                            in bit<32> old_src, in bit<32> old_dst,
                            in bit<16> old_sport, in bit<16> old_dport,
                            in bit<32> src, in bit<32> dst,
                            in bit<16> sport, in bit<16> dport) {
    bit<32> sum = (bit<32>)(~checksum) + csum16_delta32(old_src, src) + csum16_delta32(old_dst, dst)
                  + (bit<32>)(~old_sport) + (bit<32>)sport + (bit<32>)(~old_dport) + (bit<32>)dport;
    return ~csum16_fold(sum);
}

#endif /* NFC_CHECKSUM_P4 */
