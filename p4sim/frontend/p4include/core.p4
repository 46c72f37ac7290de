/* core.p4 for p4sim: the P4_16 core library, declared from the P4_16 language specification. */
/* The include guard is p4c's (_CORE_P4_): programs test it to know that core.p4 is included. */
#ifndef _CORE_P4_
#define _CORE_P4_
#define P4SIM_CORE_P4

/* Errors every target knows. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet being parsed. */
extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

/* The packet being built by a deparser. */
extern packet_out {
    void emit<T>(in T hdr);
}

extern void verify(in bool check, in error toSignal);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

#endif
