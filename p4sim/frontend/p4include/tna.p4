/* tna.p4 for p4sim: the Tofino Native Architecture (Tofino 1), for type-checking TNA programs
 * (`p4sim check --arch tna`); p4sim does not run them.
 *
 * Declared from Intel's public "P4_16 Tofino Native Architecture" specification (the intrinsic
 * metadata, the externs and the package), with the parameter lists, directions and field widths
 * checked against the TNA headers p4c publishes (backends/tofino/bf-p4c/p4include:
 * tofino1_specs.p4, tofino1_base.p4, tofino1_arch.p4). Written for p4sim, not copied: only
 * what nfcluster's TNA program and common TNA programs use is here (no ParserCounter,
 * ParserPriority, Lpf, Wred, MathUnit, Atcam/Alpm, packet generator headers, or the
 * multi-parser packages). The @padding fields have fixed widths for Tofino 1 (9-bit ports,
 * 5-bit queue ids). */
#ifndef P4SIM_TNA_P4
#define P4SIM_TNA_P4

#include "core.p4"

/* ---- Types and constants of Tofino 1 (tofino1_specs.p4) ---- */
typedef bit<9>  PortId_t;
typedef bit<16> MulticastGroupId_t;
typedef bit<5>  QueueId_t;
typedef bit<3>  MirrorType_t;
typedef bit<10> MirrorId_t;
typedef bit<3>  ResubmitType_t;
typedef bit<3>  DigestType_t;
typedef bit<16> ReplicationId_t;
typedef bit<16> L1ExclusionId_t;
typedef bit<9>  L2ExclusionId_t;

/* Bits of per-port metadata that precede the packet in the ingress parser (Tofino 1). */
const bit<32> PORT_METADATA_SIZE = 32w64;

/* Parser error flags in ig_intr_md_from_prsr.parser_err. */
const bit<16> PARSER_ERROR_OK           = 16w0x0000;
const bit<16> PARSER_ERROR_NO_MATCH     = 16w0x0001;
const bit<16> PARSER_ERROR_PARTIAL_HDR  = 16w0x0002;
const bit<16> PARSER_ERROR_CTR_RANGE    = 16w0x0004;
const bit<16> PARSER_ERROR_TIMEOUT_USER = 16w0x0008;
const bit<16> PARSER_ERROR_TIMEOUT_HW   = 16w0x0010;
const bit<16> PARSER_ERROR_SRC_EXT      = 16w0x0020;
const bit<16> PARSER_ERROR_DST_CONT     = 16w0x0040;
const bit<16> PARSER_ERROR_PHV_OWNER    = 16w0x0080;
const bit<16> PARSER_ERROR_MULTIWRITE   = 16w0x0100;
const bit<16> PARSER_ERROR_ARAM_MBE     = 16w0x0400;
const bit<16> PARSER_ERROR_FCS          = 16w0x0800;

enum MeterType_t { PACKETS, BYTES }
enum bit<8> MeterColor_t { GREEN = 8w0, YELLOW = 8w1, RED = 8w3 }
enum CounterType_t { PACKETS, BYTES, PACKETS_AND_BYTES }
enum SelectorMode_t { FAIR, RESILIENT }
enum HashAlgorithm_t { IDENTITY, RANDOM, XOR8, XOR16, XOR32, CRC8, CRC16, CRC32, CRC64, CUSTOM }

match_kind {
    range,
    selector,
    atcam_partition_index
}

error {
    CounterRange,
    Timeout,
    PhvOwner,
    MultiWrite,
    IbufOverflow,
    IbufUnderflow
}

/* ---- Ingress intrinsic metadata ---- */

/* Extracted first by the ingress parser (64 bits; PORT_METADATA_SIZE more bits follow). */
header ingress_intrinsic_metadata_t {
    bit<1>   resubmit_flag;
    bit<1>   _pad1;
    bit<2>   packet_version;
    bit<3>   _pad2;
    PortId_t ingress_port;
    bit<48>  ingress_mac_tstamp;
}

/* What ingress tells the traffic manager. */
struct ingress_intrinsic_metadata_for_tm_t {
    PortId_t           ucast_egress_port;
    bit<1>             bypass_egress;
    bit<1>             deflect_on_drop;
    bit<3>             ingress_cos;
    QueueId_t          qid;
    bit<3>             icos_for_copy_to_cpu;
    bit<1>             copy_to_cpu;
    bit<2>             packet_color;
    bit<1>             disable_ucast_cutthru;
    bit<1>             enable_mcast_cutthru;
    MulticastGroupId_t mcast_grp_a;
    MulticastGroupId_t mcast_grp_b;
    bit<13>            level1_mcast_hash;
    bit<13>            level2_mcast_hash;
    L1ExclusionId_t    level1_exclusion_id;
    L2ExclusionId_t    level2_exclusion_id;
    bit<16>            rid;
}

/* What the ingress parser found. */
struct ingress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

/* What ingress tells its deparser: drop, digest, resubmit, mirror. */
struct ingress_intrinsic_metadata_for_deparser_t {
    bit<3>         drop_ctl;
    DigestType_t   digest_type;
    ResubmitType_t resubmit_type;
    MirrorType_t   mirror_type;
}

/* ---- Egress intrinsic metadata ---- */

/* Extracted first by the egress parser. */
header egress_intrinsic_metadata_t {
    bit<7>    _pad0;
    PortId_t  egress_port;
    bit<5>    _pad1;
    bit<19>   enq_qdepth;
    bit<6>    _pad2;
    bit<2>    enq_congest_stat;
    bit<14>   _pad3;
    bit<18>   enq_tstamp;
    bit<5>    _pad4;
    bit<19>   deq_qdepth;
    bit<6>    _pad5;
    bit<2>    deq_congest_stat;
    bit<8>    app_pool_congest_stat;
    bit<14>   _pad6;
    bit<18>   deq_timedelta;
    bit<16>   egress_rid;
    bit<7>    _pad7;
    bit<1>    egress_rid_first;
    bit<3>    _pad8;
    QueueId_t egress_qid;
    bit<5>    _pad9;
    bit<3>    egress_cos;
    bit<7>    _pad10;
    bit<1>    deflection_flag;
    bit<16>   pkt_length;
}

struct egress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

struct egress_intrinsic_metadata_for_deparser_t {
    bit<3>       drop_ctl;
    MirrorType_t mirror_type;
    bit<1>       coalesce_flush;
    bit<7>       coalesce_length;
}

struct egress_intrinsic_metadata_for_output_port_t {
    bit<1> capture_tstamp_on_tx;
    bit<1> update_delay_on_tx;
}

/* ---- Externs ---- */

/* The checksum unit: 16-bit ones' complement sums (parser: verify, deparser: update). */
extern Checksum {
    Checksum();
    void add<T>(in T data);
    void subtract<T>(in T data);
    bool verify();
    void subtract_all_and_deposit<T>(out T residual);
    bit<16> get();
    bit<16> update<T>(in T data, @optional in bool zeros_as_ones);
}

extern CRCPolynomial<T> {
    CRCPolynomial(T coeff, bool reversed, bool msb, bool extended, T init, T xor);
}

/* A hash of width W over a list of fields. */
extern Hash<W> {
    Hash(HashAlgorithm_t algo);
    Hash(HashAlgorithm_t algo, CRCPolynomial<_> poly);
    W get<D>(in D data);
}

extern Random<W> {
    Random();
    W get();
}

/* Indexed counter of `size` cells, index type I, cell width W. */
extern Counter<W, I> {
    Counter(bit<32> size, CounterType_t type);
    void count(in I index, @optional in bit<32> adjust_byte_count);
}

extern DirectCounter<W> {
    DirectCounter(CounterType_t type);
    void count(@optional in bit<32> adjust_byte_count);
}

/* Indexed meter; execute returns a MeterColor_t value (green 0, yellow 1, red 3). */
extern Meter<I> {
    Meter(bit<32> size, MeterType_t type);
    Meter(bit<32> size, MeterType_t type, bit<8> red, bit<8> yellow, bit<8> green);
    bit<8> execute(in I index, in MeterColor_t color, @optional in bit<32> adjust_byte_count);
    bit<8> execute(in I index, @optional in bit<32> adjust_byte_count);
}

extern DirectMeter {
    DirectMeter(MeterType_t type);
    DirectMeter(MeterType_t type, bit<8> red, bit<8> yellow, bit<8> green);
    bit<8> execute(in MeterColor_t color, @optional in bit<32> adjust_byte_count);
    bit<8> execute(@optional in bit<32> adjust_byte_count);
}

/* Register array of `size` cells of type T, index type I. */
extern Register<T, I> {
    Register(bit<32> size);
    Register(bit<32> size, T initial_value);
    T read(in I index);
    T write(in I index, in T value);
}

/* One atomic read-modify-write of a Register cell per packet: the instance implements the
   abstract `apply`, `execute` runs it on the cell at `index` and returns its `rv`. */
extern RegisterAction<T, I, U> {
    RegisterAction(Register<_, _> reg);
    U execute(in I index);
    U execute_log();
    abstract void apply(inout T value, @optional out U rv);
    U predicate(@optional in bool cmplo, @optional in bool cmphi);
}

extern ActionProfile {
    ActionProfile(bit<32> size);
}

extern ActionSelector {
    ActionSelector(ActionProfile action_profile, Hash<_> hash, SelectorMode_t mode,
                   bit<32> max_group_size, bit<32> num_groups);
}

/* Mirroring from a deparser (mirror_type selects the instance). */
extern Mirror {
    Mirror(MirrorType_t mirror_type);
    void emit(in MirrorId_t session_id);
    void emit<T>(in MirrorId_t session_id, in T hdr);
}

/* Resubmission from the ingress deparser (resubmit_type selects the instance). */
extern Resubmit {
    Resubmit(ResubmitType_t resubmit_type);
    void emit();
    void emit<T>(in T hdr);
}

/* A digest stream to the control plane, packed in the ingress deparser (digest_type selects
   the instance). */
extern Digest<T> {
    Digest(DigestType_t digest_type);
    void pack(in T data);
}

/* ---- Programmable blocks and packages (tofino1_arch.p4's shapes) ---- */

parser IngressParserT<H, M>(
    packet_in pkt,
    out H hdr,
    out M ig_md,
    @optional out ingress_intrinsic_metadata_t ig_intr_md,
    @optional out ingress_intrinsic_metadata_for_tm_t ig_intr_md_for_tm,
    @optional out ingress_intrinsic_metadata_from_parser_t ig_intr_md_from_prsr);

parser EgressParserT<H, M>(
    packet_in pkt,
    out H hdr,
    out M eg_md,
    @optional out egress_intrinsic_metadata_t eg_intr_md,
    @optional out egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr,
    @optional out egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr);

control IngressT<H, M>(
    inout H hdr,
    inout M ig_md,
    @optional in ingress_intrinsic_metadata_t ig_intr_md,
    @optional in ingress_intrinsic_metadata_from_parser_t ig_intr_md_from_prsr,
    @optional inout ingress_intrinsic_metadata_for_deparser_t ig_intr_md_for_dprsr,
    @optional inout ingress_intrinsic_metadata_for_tm_t ig_intr_md_for_tm);

control EgressT<H, M>(
    inout H hdr,
    inout M eg_md,
    @optional in egress_intrinsic_metadata_t eg_intr_md,
    @optional in egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr,
    @optional inout egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr,
    @optional inout egress_intrinsic_metadata_for_output_port_t eg_intr_md_for_oport);

control IngressDeparserT<H, M>(
    packet_out pkt,
    inout H hdr,
    in M metadata,
    @optional in ingress_intrinsic_metadata_for_deparser_t ig_intr_md_for_dprsr,
    @optional in ingress_intrinsic_metadata_t ig_intr_md);

control EgressDeparserT<H, M>(
    packet_out pkt,
    inout H hdr,
    in M metadata,
    @optional in egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr,
    @optional in egress_intrinsic_metadata_t eg_intr_md,
    @optional in egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr);

package Pipeline<IH, IM, EH, EM>(
    IngressParserT<IH, IM> ingress_parser,
    IngressT<IH, IM> ingress,
    IngressDeparserT<IH, IM> ingress_deparser,
    EgressParserT<EH, EM> egress_parser,
    EgressT<EH, EM> egress,
    EgressDeparserT<EH, EM> egress_deparser);

/* Up to four pipes (Tofino 1 has up to four); nfcluster uses one. */
package Switch<IH0, IM0, EH0, EM0, IH1, IM1, EH1, EM1,
               IH2, IM2, EH2, EM2, IH3, IM3, EH3, EM3>(
    Pipeline<IH0, IM0, EH0, EM0> pipe0,
    @optional Pipeline<IH1, IM1, EH1, EM1> pipe1,
    @optional Pipeline<IH2, IM2, EH2, EM2> pipe2,
    @optional Pipeline<IH3, IM3, EH3, EM3> pipe3);

#endif /* P4SIM_TNA_P4 */
