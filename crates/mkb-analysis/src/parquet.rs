//! A minimal Apache Parquet writer: flat schema, one row group, one uncompressed PLAIN data
//! page (v1) per column, definition levels RLE-encoded for nullable columns, no statistics
//! and no dictionary. That is all `mkb export --format parquet` needs, and it keeps the crate
//! free of the arrow/parquet dependency tree. The file metadata is Thrift compact protocol,
//! written by hand below (field ids from parquet-format's parquet.thrift).
//!
//! Readers checked: pyarrow / pandas and polars (see tests/export_python.rs).

use std::io::{self, Write};

/// Physical column types supported.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    Bool(Vec<Option<bool>>),
    Int32(Vec<Option<i32>>),
    Int64(Vec<Option<i64>>),
    Double(Vec<Option<f64>>),
    /// UTF-8 strings (BYTE_ARRAY with the STRING logical type).
    Utf8(Vec<Option<String>>),
}

impl ColumnData {
    fn len(&self) -> usize {
        match self {
            ColumnData::Bool(v) => v.len(),
            ColumnData::Int32(v) => v.len(),
            ColumnData::Int64(v) => v.len(),
            ColumnData::Double(v) => v.len(),
            ColumnData::Utf8(v) => v.len(),
        }
    }
    /// Parquet physical type id: BOOLEAN 0, INT32 1, INT64 2, DOUBLE 5, BYTE_ARRAY 6.
    fn physical_type(&self) -> i32 {
        match self {
            ColumnData::Bool(_) => 0,
            ColumnData::Int32(_) => 1,
            ColumnData::Int64(_) => 2,
            ColumnData::Double(_) => 5,
            ColumnData::Utf8(_) => 6,
        }
    }
    fn is_present(&self, i: usize) -> bool {
        match self {
            ColumnData::Bool(v) => v[i].is_some(),
            ColumnData::Int32(v) => v[i].is_some(),
            ColumnData::Int64(v) => v[i].is_some(),
            ColumnData::Double(v) => v[i].is_some(),
            ColumnData::Utf8(v) => v[i].is_some(),
        }
    }
    /// PLAIN encoding of the present values.
    fn plain_values(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            ColumnData::Bool(v) => {
                let bits: Vec<bool> = v.iter().flatten().copied().collect();
                out.resize(bits.len().div_ceil(8), 0u8);
                for (i, b) in bits.iter().enumerate() {
                    if *b {
                        out[i / 8] |= 1 << (i % 8);
                    }
                }
            }
            ColumnData::Int32(v) => v
                .iter()
                .flatten()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ColumnData::Int64(v) => v
                .iter()
                .flatten()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ColumnData::Double(v) => v
                .iter()
                .flatten()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ColumnData::Utf8(v) => v.iter().flatten().for_each(|s| {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }),
        }
        out
    }
}

/// One column: name, whether it may hold nulls (OPTIONAL) and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub nullable: bool,
    pub data: ColumnData,
}

/// Thrift compact protocol encoder (only what parquet metadata needs).
struct Compact {
    buf: Vec<u8>,
    last_id: Vec<i16>,
}

const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_STRUCT: u8 = 12;

impl Compact {
    fn new() -> Compact {
        Compact {
            buf: Vec::new(),
            last_id: vec![0],
        }
    }
    fn varint(&mut self, mut v: u64) {
        loop {
            if v < 0x80 {
                self.buf.push(v as u8);
                return;
            }
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
    }
    fn zigzag(v: i64) -> u64 {
        ((v << 1) ^ (v >> 63)) as u64
    }
    fn field(&mut self, id: i16, ty: u8) {
        let last = self.last_id.last_mut().expect("inside a struct");
        let delta = id - *last;
        if delta > 0 && delta <= 15 {
            self.buf.push(((delta as u8) << 4) | ty);
        } else {
            self.buf.push(ty);
            let z = Self::zigzag(id as i64);
            *last = id;
            self.varint(z);
            return;
        }
        *last = id;
    }
    fn i32(&mut self, id: i16, v: i32) {
        self.field(id, T_I32);
        self.varint(Self::zigzag(v as i64));
    }
    fn i64(&mut self, id: i16, v: i64) {
        self.field(id, T_I64);
        self.varint(Self::zigzag(v));
    }
    #[allow(dead_code)]
    fn bool(&mut self, id: i16, v: bool) {
        self.field(id, if v { T_TRUE } else { T_FALSE });
    }
    fn binary(&mut self, id: i16, v: &[u8]) {
        self.field(id, T_BINARY);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
    fn struct_begin(&mut self, id: i16) {
        self.field(id, T_STRUCT);
        self.last_id.push(0);
    }
    /// Start a struct that is a list element (no field header).
    fn elem_struct_begin(&mut self) {
        self.last_id.push(0);
    }
    fn struct_end(&mut self) {
        self.buf.push(0);
        self.last_id.pop();
    }
    fn list_begin(&mut self, id: i16, elem: u8, size: usize) {
        self.field(id, T_LIST);
        if size < 15 {
            self.buf.push(((size as u8) << 4) | elem);
        } else {
            self.buf.push(0xf0 | elem);
            self.varint(size as u64);
        }
    }
    fn elem_i32(&mut self, v: i32) {
        self.varint(Self::zigzag(v as i64));
    }
    fn elem_binary(&mut self, v: &[u8]) {
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
    /// Finish the top-level struct.
    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0);
        self.buf
    }
}

/// Definition levels (0 = null, 1 = present) in the RLE/bit-packing hybrid, RLE runs only,
/// bit width 1, preceded by their byte length (4 bytes little endian), as data page v1 wants.
fn def_levels(data: &ColumnData, n: usize) -> Vec<u8> {
    let mut rle = Vec::new();
    let mut i = 0;
    while i < n {
        let v = data.is_present(i);
        let mut j = i;
        while j < n && data.is_present(j) == v {
            j += 1;
        }
        let mut header = ((j - i) as u64) << 1;
        loop {
            if header < 0x80 {
                rle.push(header as u8);
                break;
            }
            rle.push((header as u8 & 0x7f) | 0x80);
            header >>= 7;
        }
        rle.push(v as u8);
        i = j;
    }
    let mut out = (rle.len() as u32).to_le_bytes().to_vec();
    out.extend(rle);
    out
}

/// Write a Parquet file holding `columns` (all of the same length) and key-value metadata.
pub fn write_parquet(
    w: &mut impl Write,
    columns: &[Column],
    key_values: &[(String, String)],
) -> io::Result<()> {
    let n = columns.first().map_or(0, |c| c.data.len());
    if columns.iter().any(|c| c.data.len() != n) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "columns differ in length",
        ));
    }
    for c in columns {
        if !c.nullable && (0..n).any(|i| !c.data.is_present(i)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("null in required column {}", c.name),
            ));
        }
    }
    let mut offset: u64 = 4;
    w.write_all(b"PAR1")?;
    // (data_page_offset, total size) per column.
    let mut chunks = Vec::new();
    if n > 0 {
        for c in columns {
            let mut body = if c.nullable {
                def_levels(&c.data, n)
            } else {
                Vec::new()
            };
            body.extend(c.data.plain_values());
            let size = i32::try_from(body.len()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "column too large for one page")
            })?;
            let mut h = Compact::new();
            h.i32(1, 0); // type: DATA_PAGE
            h.i32(2, size); // uncompressed_page_size
            h.i32(3, size); // compressed_page_size
            h.struct_begin(5); // data_page_header
            h.i32(1, n as i32); // num_values (nulls included)
            h.i32(2, 0); // encoding: PLAIN
            h.i32(3, 3); // definition_level_encoding: RLE
            h.i32(4, 3); // repetition_level_encoding: RLE
            h.struct_end();
            let header = h.finish();
            w.write_all(&header)?;
            w.write_all(&body)?;
            let total = (header.len() + body.len()) as u64;
            chunks.push((offset, total));
            offset += total;
        }
    }
    // FileMetaData
    let mut m = Compact::new();
    m.i32(1, 1); // version
    m.list_begin(2, T_STRUCT, columns.len() + 1); // schema
    m.elem_struct_begin();
    m.binary(4, b"schema");
    m.i32(5, columns.len() as i32); // num_children
    m.struct_end();
    for c in columns {
        m.elem_struct_begin();
        m.i32(1, c.data.physical_type());
        m.i32(3, if c.nullable { 1 } else { 0 }); // OPTIONAL / REQUIRED
        m.binary(4, c.name.as_bytes());
        if matches!(c.data, ColumnData::Utf8(_)) {
            m.i32(6, 0); // converted_type: UTF8
            m.struct_begin(10); // logicalType
            m.struct_begin(1); // STRING
            m.struct_end();
            m.struct_end();
        }
        m.struct_end();
    }
    m.i64(3, n as i64); // num_rows
    let groups = if n > 0 { 1 } else { 0 };
    m.list_begin(4, T_STRUCT, groups); // row_groups
    if n > 0 {
        m.elem_struct_begin();
        m.list_begin(1, T_STRUCT, columns.len()); // columns
        for (c, (page_offset, total)) in columns.iter().zip(&chunks) {
            m.elem_struct_begin();
            m.i64(2, *page_offset as i64); // file_offset
            m.struct_begin(3); // meta_data
            m.i32(1, c.data.physical_type());
            m.list_begin(2, T_I32, 2); // encodings
            m.elem_i32(0); // PLAIN
            m.elem_i32(3); // RLE
            m.list_begin(3, T_BINARY, 1); // path_in_schema
            m.elem_binary(c.name.as_bytes());
            m.i32(4, 0); // codec: UNCOMPRESSED
            m.i64(5, n as i64); // num_values
            m.i64(6, *total as i64); // total_uncompressed_size
            m.i64(7, *total as i64); // total_compressed_size
            m.i64(9, *page_offset as i64); // data_page_offset
            m.struct_end();
            m.struct_end();
        }
        let total: u64 = chunks.iter().map(|c| c.1).sum();
        m.i64(2, total as i64); // total_byte_size
        m.i64(3, n as i64); // num_rows
        m.struct_end();
    }
    if !key_values.is_empty() {
        m.list_begin(5, T_STRUCT, key_values.len());
        for (k, v) in key_values {
            m.elem_struct_begin();
            m.binary(1, k.as_bytes());
            m.binary(2, v.as_bytes());
            m.struct_end();
        }
    }
    m.binary(
        6,
        concat!("mkb-analysis version ", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    let meta = m.finish();
    w.write_all(&meta)?;
    w.write_all(&(meta.len() as u32).to_le_bytes())?;
    w.write_all(b"PAR1")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_protocol_encodings() {
        let mut c = Compact::new();
        c.i32(1, 1); // delta 1, type 5 -> 0x15, zigzag(1) = 2
        c.i32(3, -1); // delta 2 -> 0x25, zigzag(-1) = 1
        c.i64(20, 300); // delta 17 > 15: long form 0x06, zigzag(20) = 40, zigzag(300) = 600 -> 0xd8 0x04
        c.binary(21, b"ab");
        let out = c.finish();
        assert_eq!(
            out,
            vec![0x15, 0x02, 0x25, 0x01, 0x06, 40, 0xd8, 0x04, 0x18, 0x02, b'a', b'b', 0x00]
        );
        let mut c = Compact::new();
        c.list_begin(2, T_I32, 20);
        assert_eq!(c.buf, vec![0x29, 0xf5, 20]);
    }

    #[test]
    fn def_levels_are_rle_runs() {
        let d = ColumnData::Int32(vec![Some(1), Some(2), None, Some(3)]);
        // runs: 2 x present (header 4, value 1), 1 x null (2, 0), 1 x present (2, 1); length 6
        assert_eq!(def_levels(&d, 4), vec![6, 0, 0, 0, 4, 1, 2, 0, 2, 1]);
    }

    #[test]
    fn file_layout() {
        let cols = vec![
            Column {
                name: "a".into(),
                nullable: false,
                data: ColumnData::Int64(vec![Some(1), Some(2)]),
            },
            Column {
                name: "b".into(),
                nullable: true,
                data: ColumnData::Utf8(vec![Some("x".into()), None]),
            },
            Column {
                name: "c".into(),
                nullable: false,
                data: ColumnData::Bool(vec![Some(true), Some(false)]),
            },
        ];
        let mut buf = Vec::new();
        write_parquet(&mut buf, &cols, &[("k".into(), "v".into())]).unwrap();
        assert_eq!(&buf[..4], b"PAR1");
        assert_eq!(&buf[buf.len() - 4..], b"PAR1");
        let meta_len =
            u32::from_le_bytes(buf[buf.len() - 8..buf.len() - 4].try_into().unwrap()) as usize;
        assert!(meta_len < buf.len());
        let meta = &buf[buf.len() - 8 - meta_len..buf.len() - 8];
        assert!(meta.windows(6).any(|w| w == b"schema"));
        assert!(meta.windows(12).any(|w| w == b"mkb-analysis"));
        // Required columns reject nulls.
        let bad = vec![Column {
            name: "a".into(),
            nullable: false,
            data: ColumnData::Double(vec![None]),
        }];
        assert!(write_parquet(&mut Vec::new(), &bad, &[]).is_err());
    }
}
