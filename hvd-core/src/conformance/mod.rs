//! The public conformance suite (being written).
