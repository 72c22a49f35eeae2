"""Normalizers: string -> string, written as Polars expressions so that they run columnar over a
whole chunk of sequences. Each one also serialises to (and loads from) HF `tokenizer.json`.

Exactness against HF `tokenizers` (0.23): every normalizer here gives the same string as HF's on
every input, with these documented exceptions, all due to HF's older Unicode tables:

* HF's BertNormalizer and StripAccents decide "control", "non-spacing mark" and "combining mark"
  with tables from older Unicode versions (crates `unicode_categories` and
  `unicode-normalization-alignments`). We do not use Polars' (newer) `\\p{..}` classes for these:
  the exact code point sets HF uses are embedded below (`HF_CLEAN_REMOVED`,
  `HF_NONSPACING_MARK`, `HF_COMBINING_MARK`), generated from HF itself and re-checked against it
  over all of Unicode by `tests/test_normalizers.py`. So these agree exactly.
* NFD/NFKD/NFC/NFKC: Polars uses the `unicode-normalization` crate (Unicode 16); HF uses
  `unicode-normalization-alignments`, whose tables are older (about Unicode 12). Characters that
  were assigned, or given a decomposition, a combining class or a composition, after that
  version normalise differently: HF leaves them as they are where we decompose them (e.g.
  U+32FF SQUARE ERA NAME REIWA, U+A7F2..U+A7F4, U+10781..U+107BA), HF does not reorder the newer
  combining marks (e.g. U+1ABF.., U+1DF6..U+1DFA, U+10D69..) and does not compose Unicode-16
  pairs (Todhri, Tulu-Tigalari, Gurung Khema, Kirat Rai starters). They are exactly the 358
  code points of `UNICODE_NORMALIZATION_DIFFS` below (found by comparing HF and Polars on every
  code point alone and next to marks of each combining class; the tests check that each of them
  does differ and that nothing else does), and the property tests leave exactly these out. This
  also affects BertNormalizer's accent stripping, which runs NFD.
* Lowercase: HF lowercases character by character (`char::to_lowercase`), so a final capital
  sigma becomes `σ`; Polars' `to_lowercase` applies the final-sigma rule (`ς`). We map `Σ` to `σ`
  first, which gives HF's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .errors import TokcolumnarValueError
from .hfjson import HFObject, component_type


def _ranges(*items: int | tuple[int, int]) -> tuple[tuple[int, int], ...]:
    return tuple((x, x) if isinstance(x, int) else x for x in items)


def class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    """The inside of a Rust-regex character class matching exactly these code point ranges."""
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)


def in_ranges(cp: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(a <= cp <= b for a, b in ranges)


# --- Code point tables taken from HF tokenizers 0.23 (see the module docstring) -------------
# Characters BertNormalizer(clean_text=True) deletes: U+0000, U+FFFD and `is_control` (general
# categories Cc, Cf, Co in HF's Unicode tables) except \t \n \r.
HF_CLEAN_REMOVED = _ranges(
    (0x0, 0x8), (0xB, 0xC), (0xE, 0x1F), (0x7F, 0x9F), 0xAD, (0x600, 0x605), 0x61C, 0x6DD, 0x70F,
    0x180E, (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xE000, 0xF8FF), 0xFEFF, (0xFFF9, 0xFFFB), 0xFFFD, 0x110BD, (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), 0xE0001, (0xE0020, 0xE007F), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD),
)
# Non-spacing marks (Mn) in HF's table: what BertNormalizer's accent stripping deletes after NFD.
HF_NONSPACING_MARK = _ranges(
    (0x300, 0x36F), (0x483, 0x487), (0x591, 0x5BD), 0x5BF, (0x5C1, 0x5C2), (0x5C4, 0x5C5), 0x5C7,
    (0x610, 0x61A), (0x64B, 0x65F), 0x670, (0x6D6, 0x6DC), (0x6DF, 0x6E4), (0x6E7, 0x6E8),
    (0x6EA, 0x6ED), 0x711, (0x730, 0x74A), (0x7A6, 0x7B0), (0x7EB, 0x7F3), (0x816, 0x819),
    (0x81B, 0x823), (0x825, 0x827), (0x829, 0x82D), (0x859, 0x85B), (0x8E3, 0x902), 0x93A, 0x93C,
    (0x941, 0x948), 0x94D, (0x951, 0x957), (0x962, 0x963), 0x981, 0x9BC, (0x9C1, 0x9C4), 0x9CD,
    (0x9E2, 0x9E3), (0xA01, 0xA02), 0xA3C, (0xA41, 0xA42), (0xA47, 0xA48), (0xA4B, 0xA4D), 0xA51,
    (0xA70, 0xA71), 0xA75, (0xA81, 0xA82), 0xABC, (0xAC1, 0xAC5), (0xAC7, 0xAC8), 0xACD,
    (0xAE2, 0xAE3), 0xB01, 0xB3C, 0xB3F, (0xB41, 0xB44), 0xB4D, 0xB56, (0xB62, 0xB63), 0xB82,
    0xBC0, 0xBCD, 0xC00, (0xC3E, 0xC40), (0xC46, 0xC48), (0xC4A, 0xC4D), (0xC55, 0xC56),
    (0xC62, 0xC63), 0xC81, 0xCBC, 0xCBF, 0xCC6, (0xCCC, 0xCCD), (0xCE2, 0xCE3), 0xD01,
    (0xD41, 0xD44), 0xD4D, (0xD62, 0xD63), 0xDCA, (0xDD2, 0xDD4), 0xDD6, 0xE31, (0xE34, 0xE3A),
    (0xE47, 0xE4E), 0xEB1, (0xEB4, 0xEB9), (0xEBB, 0xEBC), (0xEC8, 0xECD), (0xF18, 0xF19), 0xF35,
    0xF37, 0xF39, (0xF71, 0xF7E), (0xF80, 0xF84), (0xF86, 0xF87), (0xF8D, 0xF97), (0xF99, 0xFBC),
    0xFC6, (0x102D, 0x1030), (0x1032, 0x1037), (0x1039, 0x103A), (0x103D, 0x103E),
    (0x1058, 0x1059), (0x105E, 0x1060), (0x1071, 0x1074), 0x1082, (0x1085, 0x1086), 0x108D,
    0x109D, (0x135D, 0x135F), (0x1712, 0x1714), (0x1732, 0x1734), (0x1752, 0x1753),
    (0x1772, 0x1773), (0x17B4, 0x17B5), (0x17B7, 0x17BD), 0x17C6, (0x17C9, 0x17D3), 0x17DD,
    (0x180B, 0x180D), 0x18A9, (0x1920, 0x1922), (0x1927, 0x1928), 0x1932, (0x1939, 0x193B),
    (0x1A17, 0x1A18), 0x1A1B, 0x1A56, (0x1A58, 0x1A5E), 0x1A60, 0x1A62, (0x1A65, 0x1A6C),
    (0x1A73, 0x1A7C), 0x1A7F, (0x1AB0, 0x1ABD), (0x1B00, 0x1B03), 0x1B34, (0x1B36, 0x1B3A),
    0x1B3C, 0x1B42, (0x1B6B, 0x1B73), (0x1B80, 0x1B81), (0x1BA2, 0x1BA5), (0x1BA8, 0x1BA9),
    (0x1BAB, 0x1BAD), 0x1BE6, (0x1BE8, 0x1BE9), 0x1BED, (0x1BEF, 0x1BF1), (0x1C2C, 0x1C33),
    (0x1C36, 0x1C37), (0x1CD0, 0x1CD2), (0x1CD4, 0x1CE0), (0x1CE2, 0x1CE8), 0x1CED, 0x1CF4,
    (0x1CF8, 0x1CF9), (0x1DC0, 0x1DF5), (0x1DFC, 0x1DFF), (0x20D0, 0x20DC), 0x20E1,
    (0x20E5, 0x20F0), (0x2CEF, 0x2CF1), 0x2D7F, (0x2DE0, 0x2DFF), (0x302A, 0x302D),
    (0x3099, 0x309A), 0xA66F, (0xA674, 0xA67D), (0xA69E, 0xA69F), (0xA6F0, 0xA6F1), 0xA802,
    0xA806, 0xA80B, (0xA825, 0xA826), 0xA8C4, (0xA8E0, 0xA8F1), (0xA926, 0xA92D),
    (0xA947, 0xA951), (0xA980, 0xA982), 0xA9B3, (0xA9B6, 0xA9B9), 0xA9BC, 0xA9E5,
    (0xAA29, 0xAA2E), (0xAA31, 0xAA32), (0xAA35, 0xAA36), 0xAA43, 0xAA4C, 0xAA7C, 0xAAB0,
    (0xAAB2, 0xAAB4), (0xAAB7, 0xAAB8), (0xAABE, 0xAABF), 0xAAC1, (0xAAEC, 0xAAED), 0xAAF6,
    0xABE5, 0xABE8, 0xABED, 0xFB1E, (0xFE00, 0xFE0F), (0xFE20, 0xFE2F), 0x101FD, 0x102E0,
    (0x10376, 0x1037A), (0x10A01, 0x10A03), (0x10A05, 0x10A06), (0x10A0C, 0x10A0F),
    (0x10A38, 0x10A3A), 0x10A3F, (0x10AE5, 0x10AE6), 0x11001, (0x11038, 0x11046),
    (0x1107F, 0x11081), (0x110B3, 0x110B6), (0x110B9, 0x110BA), (0x11100, 0x11102),
    (0x11127, 0x1112B), (0x1112D, 0x11134), 0x11173, (0x11180, 0x11181), (0x111B6, 0x111BE),
    (0x111CA, 0x111CC), (0x1122F, 0x11231), 0x11234, (0x11236, 0x11237), 0x112DF,
    (0x112E3, 0x112EA), (0x11300, 0x11301), 0x1133C, 0x11340, (0x11366, 0x1136C),
    (0x11370, 0x11374), (0x114B3, 0x114B8), 0x114BA, (0x114BF, 0x114C0), (0x114C2, 0x114C3),
    (0x115B2, 0x115B5), (0x115BC, 0x115BD), (0x115BF, 0x115C0), (0x115DC, 0x115DD),
    (0x11633, 0x1163A), 0x1163D, (0x1163F, 0x11640), 0x116AB, 0x116AD, (0x116B0, 0x116B5),
    0x116B7, (0x1171D, 0x1171F), (0x11722, 0x11725), (0x11727, 0x1172B), (0x16AF0, 0x16AF4),
    (0x16B30, 0x16B36), (0x16F8F, 0x16F92), (0x1BC9D, 0x1BC9E), (0x1D167, 0x1D169),
    (0x1D17B, 0x1D182), (0x1D185, 0x1D18B), (0x1D1AA, 0x1D1AD), (0x1D242, 0x1D244),
    (0x1DA00, 0x1DA36), (0x1DA3B, 0x1DA6C), 0x1DA75, 0x1DA84, (0x1DA9B, 0x1DA9F),
    (0x1DAA1, 0x1DAAF), (0x1E8D0, 0x1E8D6), (0xE0100, 0xE01EF),
)
# Combining marks (Mn, Mc, Me) in HF's table: what StripAccents deletes.
HF_COMBINING_MARK = _ranges(
    (0x300, 0x36F), (0x483, 0x489), (0x591, 0x5BD), 0x5BF, (0x5C1, 0x5C2), (0x5C4, 0x5C5), 0x5C7,
    (0x610, 0x61A), (0x64B, 0x65F), 0x670, (0x6D6, 0x6DC), (0x6DF, 0x6E4), (0x6E7, 0x6E8),
    (0x6EA, 0x6ED), 0x711, (0x730, 0x74A), (0x7A6, 0x7B0), (0x7EB, 0x7F3), (0x816, 0x819),
    (0x81B, 0x823), (0x825, 0x827), (0x829, 0x82D), (0x859, 0x85B), (0x8D4, 0x8E1),
    (0x8E3, 0x903), (0x93A, 0x93C), (0x93E, 0x94F), (0x951, 0x957), (0x962, 0x963),
    (0x981, 0x983), 0x9BC, (0x9BE, 0x9C4), (0x9C7, 0x9C8), (0x9CB, 0x9CD), 0x9D7, (0x9E2, 0x9E3),
    (0xA01, 0xA03), 0xA3C, (0xA3E, 0xA42), (0xA47, 0xA48), (0xA4B, 0xA4D), 0xA51, (0xA70, 0xA71),
    0xA75, (0xA81, 0xA83), 0xABC, (0xABE, 0xAC5), (0xAC7, 0xAC9), (0xACB, 0xACD), (0xAE2, 0xAE3),
    (0xB01, 0xB03), 0xB3C, (0xB3E, 0xB44), (0xB47, 0xB48), (0xB4B, 0xB4D), (0xB56, 0xB57),
    (0xB62, 0xB63), 0xB82, (0xBBE, 0xBC2), (0xBC6, 0xBC8), (0xBCA, 0xBCD), 0xBD7, (0xC00, 0xC03),
    (0xC3E, 0xC44), (0xC46, 0xC48), (0xC4A, 0xC4D), (0xC55, 0xC56), (0xC62, 0xC63),
    (0xC81, 0xC83), 0xCBC, (0xCBE, 0xCC4), (0xCC6, 0xCC8), (0xCCA, 0xCCD), (0xCD5, 0xCD6),
    (0xCE2, 0xCE3), (0xD01, 0xD03), (0xD3E, 0xD44), (0xD46, 0xD48), (0xD4A, 0xD4D), 0xD57,
    (0xD62, 0xD63), (0xD82, 0xD83), 0xDCA, (0xDCF, 0xDD4), 0xDD6, (0xDD8, 0xDDF), (0xDF2, 0xDF3),
    0xE31, (0xE34, 0xE3A), (0xE47, 0xE4E), 0xEB1, (0xEB4, 0xEB9), (0xEBB, 0xEBC), (0xEC8, 0xECD),
    (0xF18, 0xF19), 0xF35, 0xF37, 0xF39, (0xF3E, 0xF3F), (0xF71, 0xF84), (0xF86, 0xF87),
    (0xF8D, 0xF97), (0xF99, 0xFBC), 0xFC6, (0x102B, 0x103E), (0x1056, 0x1059), (0x105E, 0x1060),
    (0x1062, 0x1064), (0x1067, 0x106D), (0x1071, 0x1074), (0x1082, 0x108D), 0x108F,
    (0x109A, 0x109D), (0x135D, 0x135F), (0x1712, 0x1714), (0x1732, 0x1734), (0x1752, 0x1753),
    (0x1772, 0x1773), (0x17B4, 0x17D3), 0x17DD, (0x180B, 0x180D), (0x1885, 0x1886), 0x18A9,
    (0x1920, 0x192B), (0x1930, 0x193B), (0x1A17, 0x1A1B), (0x1A55, 0x1A5E), (0x1A60, 0x1A7C),
    0x1A7F, (0x1AB0, 0x1ABE), (0x1B00, 0x1B04), (0x1B34, 0x1B44), (0x1B6B, 0x1B73),
    (0x1B80, 0x1B82), (0x1BA1, 0x1BAD), (0x1BE6, 0x1BF3), (0x1C24, 0x1C37), (0x1CD0, 0x1CD2),
    (0x1CD4, 0x1CE8), 0x1CED, (0x1CF2, 0x1CF4), (0x1CF8, 0x1CF9), (0x1DC0, 0x1DF5),
    (0x1DFB, 0x1DFF), (0x20D0, 0x20F0), (0x2CEF, 0x2CF1), 0x2D7F, (0x2DE0, 0x2DFF),
    (0x302A, 0x302F), (0x3099, 0x309A), (0xA66F, 0xA672), (0xA674, 0xA67D), (0xA69E, 0xA69F),
    (0xA6F0, 0xA6F1), 0xA802, 0xA806, 0xA80B, (0xA823, 0xA827), (0xA880, 0xA881),
    (0xA8B4, 0xA8C5), (0xA8E0, 0xA8F1), (0xA926, 0xA92D), (0xA947, 0xA953), (0xA980, 0xA983),
    (0xA9B3, 0xA9C0), 0xA9E5, (0xAA29, 0xAA36), 0xAA43, (0xAA4C, 0xAA4D), (0xAA7B, 0xAA7D),
    0xAAB0, (0xAAB2, 0xAAB4), (0xAAB7, 0xAAB8), (0xAABE, 0xAABF), 0xAAC1, (0xAAEB, 0xAAEF),
    (0xAAF5, 0xAAF6), (0xABE3, 0xABEA), (0xABEC, 0xABED), 0xFB1E, (0xFE00, 0xFE0F),
    (0xFE20, 0xFE2F), 0x101FD, 0x102E0, (0x10376, 0x1037A), (0x10A01, 0x10A03),
    (0x10A05, 0x10A06), (0x10A0C, 0x10A0F), (0x10A38, 0x10A3A), 0x10A3F, (0x10AE5, 0x10AE6),
    (0x11000, 0x11002), (0x11038, 0x11046), (0x1107F, 0x11082), (0x110B0, 0x110BA),
    (0x11100, 0x11102), (0x11127, 0x11134), 0x11173, (0x11180, 0x11182), (0x111B3, 0x111C0),
    (0x111CA, 0x111CC), (0x1122C, 0x11237), 0x1123E, (0x112DF, 0x112EA), (0x11300, 0x11303),
    0x1133C, (0x1133E, 0x11344), (0x11347, 0x11348), (0x1134B, 0x1134D), 0x11357,
    (0x11362, 0x11363), (0x11366, 0x1136C), (0x11370, 0x11374), (0x11435, 0x11446),
    (0x114B0, 0x114C3), (0x115AF, 0x115B5), (0x115B8, 0x115C0), (0x115DC, 0x115DD),
    (0x11630, 0x11640), (0x116AB, 0x116B7), (0x1171D, 0x1172B), (0x11C2F, 0x11C36),
    (0x11C38, 0x11C3F), (0x11C92, 0x11CA7), (0x11CA9, 0x11CB6), (0x16AF0, 0x16AF4),
    (0x16B30, 0x16B36), (0x16F51, 0x16F7E), (0x16F8F, 0x16F92), (0x1BC9D, 0x1BC9E),
    (0x1D165, 0x1D169), (0x1D16D, 0x1D172), (0x1D17B, 0x1D182), (0x1D185, 0x1D18B),
    (0x1D1AA, 0x1D1AD), (0x1D242, 0x1D244), (0x1DA00, 0x1DA36), (0x1DA3B, 0x1DA6C), 0x1DA75,
    0x1DA84, (0x1DA9B, 0x1DA9F), (0x1DAA1, 0x1DAAF), (0x1E000, 0x1E006), (0x1E008, 0x1E018),
    (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E8D0, 0x1E8D6),
    (0x1E944, 0x1E94A), (0xE0100, 0xE01EF),
)
# CJK ideographs BertNormalizer(handle_chinese_chars=True) surrounds with spaces.
HF_CHINESE_CHARS = _ranges(
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
# Code points whose NFD/NFKD/NFC/NFKC differ between Polars and HF, alone or next to combining
# marks (newer Unicode; see the module docstring). Excluded from the property tests.
UNICODE_NORMALIZATION_DIFFS = _ranges(
    0x7FD, (0x897, 0x89F), (0x8CA, 0x8D3), 0x9FE, 0xC3C, (0xD3B, 0xD3C), 0xEBA, 0x1715,
    (0x1ABF, 0x1ADD), (0x1AE0, 0x1AEB), (0x1DF6, 0x1DFA), 0x32FF, (0xA7F1, 0xA7F4), 0xA82C,
    0xAB69, 0x105C9, 0x105D2, 0x105DA, 0x105E4, (0x10781, 0x10785), (0x10787, 0x107B0),
    (0x107B2, 0x107BA), (0x10D24, 0x10D27), (0x10D69, 0x10D6D), (0x10EAB, 0x10EAC),
    (0x10EFA, 0x10EFB), (0x10EFD, 0x10EFF), (0x10F46, 0x10F50), (0x10F82, 0x10F85), 0x11070,
    0x1133B, (0x11382, 0x11385), 0x1138B, 0x1138E, (0x11390, 0x11391), 0x113C2, 0x113C5,
    (0x113C7, 0x113C8), (0x113CE, 0x113D0), 0x1145E, (0x11839, 0x1183A), 0x11935, 0x11938,
    (0x1193D, 0x1193E), 0x11943, 0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11D42, (0x11D44, 0x11D45),
    0x11D97, (0x11F41, 0x11F42), 0x1611E, (0x16121, 0x16129), 0x1612F, 0x16D63,
    (0x16D67, 0x16D6A), (0x16FF0, 0x16FF1), (0x1CCD6, 0x1CCF9), (0x1E030, 0x1E06D), 0x1E08F,
    (0x1E130, 0x1E136), 0x1E2AE, (0x1E2EC, 0x1E2EF), (0x1E4EC, 0x1E4EF), (0x1E5EE, 0x1E5EF),
    0x1E6E3, 0x1E6E6, (0x1E6EE, 0x1E6EF), 0x1E6F5, 0x1F16C, (0x1FBF0, 0x1FBF9),
)

_CLEAN_REMOVED_RE = f"[{class_body(HF_CLEAN_REMOVED)}]"
_CHINESE_RE = f"([{class_body(HF_CHINESE_CHARS)}])"
_NONSPACING_MARK_RE = f"[{class_body(HF_NONSPACING_MARK)}]"
_COMBINING_MARK_RE = f"[{class_body(HF_COMBINING_MARK)}]"


def hf_lowercase(col: pl.Expr) -> pl.Expr:
    """HF `Lowercase`: `char::to_lowercase` on each character (no final-sigma rule)."""
    return col.str.replace_all("Σ", "σ", literal=True).str.to_lowercase()


# --- Oniguruma -> Rust regex ------------------------------------------------------------------
# HF compiles user patterns (Split, Replace) with Oniguruma; Polars with the Rust `regex` crate.
# Their `\s`, `\d`, `.`, `\p{..}` sets agree on every code point; their `\w` differs: Oniguruma
# leaves out U+200C/U+200D, and its `\w` outside brackets (not `[\w]`) also matches ² ³ ¹ ¼ ½ ¾.
# `^`/`$` are line anchors in Oniguruma, and Rust has no look-around.
ONIG_WORD_CLASS = r"[\w\xB2\xB3\xB9\xBC-\xBE--\x{200C}\x{200D}]"
ONIG_NOT_WORD_CLASS = r"[^\w\xB2\xB3\xB9\xBC-\xBE--\x{200C}\x{200D}]"
ONIG_WORD_IN_CLASS = r"[\w--\x{200C}\x{200D}]"
ONIG_NOT_WORD_IN_CLASS = r"[\W\x{200C}\x{200D}]"
_RUST_META = set("\\.+*?()|[]{}^$#&-~")


def escape_regex(text: str) -> str:
    """Escape a literal for the Rust regex crate (`regex::escape`)."""
    return "".join("\\" + c if c in _RUST_META else c for c in text)


def onig_to_rust(pattern: str) -> str:
    """Translate an HF (Oniguruma) pattern to the Rust regex crate's syntax, or raise
    `TokcolumnarError` when it uses what Rust regex cannot do (look-around, atomic groups,
    backreferences)."""
    out: list[str] = []
    i, depth = 0, 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "w":
                out.append(ONIG_WORD_IN_CLASS if depth else ONIG_WORD_CLASS)
            elif e == "W":
                out.append(ONIG_NOT_WORD_IN_CLASS if depth else ONIG_NOT_WORD_CLASS)
            elif e == "h" and depth == 0:
                out.append("[0-9a-fA-F]")
            elif e == "H" and depth == 0:
                out.append("[^0-9a-fA-F]")
            elif e.isdigit() and e != "0" and depth == 0 or e in "kKGgRXZ" and depth == 0:
                raise TokcolumnarValueError(f"regex {pattern!r}: \\{e} is not supported by Polars' "
                                            "regex engine")
            else:
                out.append(c + e)
            i += 2
            continue
        if c == "[":
            depth += 1
            out.append(c)
            if i + 1 < n and pattern[i + 1] == "^":
                out.append("^")
                i += 1
            if i + 1 < n and pattern[i + 1] == "]":  # a literal ']' first in a class
                out.append(r"\]")
                i += 1
        elif c == "]" and depth > 0:
            depth -= 1
            out.append(c)
        elif depth == 0 and c == "(" and pattern.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?>"),
                                                           i):
            raise TokcolumnarValueError(f"regex {pattern!r}: look-around and atomic groups are not "
                                        "supported by Polars' regex engine")
        elif depth == 0 and c == "^":
            out.append("(?m:^)")
        elif depth == 0 and c == "$":
            out.append("(?m:$)")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def check_regex(pattern: str) -> str:
    """Compile `pattern` once with Polars, turning a bad pattern into `TokcolumnarError`."""
    try:
        pl.select(pl.lit("").str.contains(pattern))
    except Exception as exc:  # polars raises ComputeError with the regex crate's message
        raise TokcolumnarValueError(f"invalid regex {pattern!r}: {exc}") from None
    return pattern


def pattern_from_hf(d: Any) -> tuple[str, bool]:
    """HF's `{"String": s}` / `{"Regex": r}` pattern object -> (text, is_regex)."""
    if isinstance(d, str):
        return d, False
    if isinstance(d, dict) and len(d) == 1:
        kind, value = next(iter(d.items()))
        if kind in ("String", "Regex") and isinstance(value, str):
            return value, kind == "Regex"
    raise TokcolumnarValueError(f"unsupported pattern in tokenizer.json: {d!r}")


class Normalizer:
    """Base class: `expr(col)` maps a string expression to the normalised string expression."""

    hf_type: ClassVar[str] = ""
    registry: ClassVar[dict[str, type[Normalizer]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hf_type:
            Normalizer.registry[cls.hf_type] = cls

    def expr(self, col: pl.Expr) -> pl.Expr:
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def fields(cls, d: dict[str, Any]) -> HFObject:
        """`d` with typed field access, named in errors as `normalizer <type>`."""
        return HFObject(d, f"normalizer {cls.hf_type}")

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        cls.fields(d)
        return cls()

    def apply(self, texts: list[str]) -> list[str]:
        """Normalise plain Python strings (used by the encoder and by tests)."""
        return pl.Series("t", texts, dtype=pl.String).to_frame().select(
            self.expr(pl.col("t"))).to_series().to_list()


@dataclass
class Lowercase(Normalizer):
    hf_type: ClassVar[str] = "Lowercase"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return hf_lowercase(col)


@dataclass
class NFC(Normalizer):
    hf_type: ClassVar[str] = "NFC"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFC")


@dataclass
class NFKC(Normalizer):
    hf_type: ClassVar[str] = "NFKC"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFKC")


@dataclass
class NFD(Normalizer):
    hf_type: ClassVar[str] = "NFD"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFD")


@dataclass
class NFKD(Normalizer):
    hf_type: ClassVar[str] = "NFKD"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFKD")


@dataclass
class StripAccents(Normalizer):
    """HF `StripAccents`: delete combining marks (it does not decompose first: put NFD/NFKD
    before it, as HF does)."""

    hf_type: ClassVar[str] = "StripAccents"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.replace_all(_COMBINING_MARK_RE, "")


@dataclass
class BertNormalizer(Normalizer):
    """HF `BertNormalizer`: clean text (delete NUL, U+FFFD and control characters, map every
    whitespace to ' '), pad CJK ideographs with spaces, strip accents (NFD, then delete
    non-spacing marks; defaults to the value of `lowercase`), lowercase."""

    hf_type: ClassVar[str] = "BertNormalizer"
    clean_text: bool = True
    handle_chinese_chars: bool = True
    strip_accents: bool | None = None
    lowercase: bool = True

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.clean_text:
            col = col.str.replace_all(_CLEAN_REMOVED_RE, "").str.replace_all(r"\s", " ")
        if self.handle_chinese_chars:
            col = col.str.replace_all(_CHINESE_RE, " ${1} ")
        strip = self.lowercase if self.strip_accents is None else self.strip_accents
        if strip:
            col = col.str.normalize("NFD").str.replace_all(_NONSPACING_MARK_RE, "")
        if self.lowercase:
            col = hf_lowercase(col)
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "clean_text": self.clean_text,
                "handle_chinese_chars": self.handle_chinese_chars,
                "strip_accents": self.strip_accents, "lowercase": self.lowercase}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        return cls(clean_text=f.bool("clean_text", True),
                   handle_chinese_chars=f.bool("handle_chinese_chars", True),
                   strip_accents=f.bool("strip_accents", None, nullable=True),
                   lowercase=f.bool("lowercase", True))


@dataclass
class Replace(Normalizer):
    """HF `Replace`: every occurrence of `pattern` becomes `content`. The pattern is a literal
    string, or with `regex=True` an HF (Oniguruma) regex; `content` is always literal (HF 0.23
    does not expand `$1` in it)."""

    hf_type: ClassVar[str] = "Replace"
    pattern: str = ""
    content: str = ""
    regex: bool = False

    def __post_init__(self) -> None:
        if self.regex:
            self._rust = check_regex(onig_to_rust(self.pattern))
        elif not self.pattern:
            raise TokcolumnarValueError("Replace: empty pattern")

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.regex:
            return col.str.replace_all(self._rust, self.content.replace("$", "$$"))
        return col.str.replace_all(self.pattern, self.content, literal=True)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type,
                "pattern": {"Regex" if self.regex else "String": self.pattern},
                "content": self.content}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        pattern, is_regex = pattern_from_hf(f.raw("pattern"))
        return cls(pattern, f.str("content"), is_regex)


@dataclass
class Strip(Normalizer):
    """HF `Strip`: trim whitespace (`char::is_whitespace`) on the left and/or right."""

    hf_type: ClassVar[str] = "Strip"
    left: bool = True
    right: bool = True

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.left and self.right:
            return col.str.strip_chars()
        if self.left:
            return col.str.strip_chars_start()
        if self.right:
            return col.str.strip_chars_end()
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "strip_left": self.left, "strip_right": self.right}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        return cls(f.bool("strip_left", True), f.bool("strip_right", True))


@dataclass
class Prepend(Normalizer):
    """HF `Prepend`: put `prepend` before every non-empty sequence."""

    hf_type: ClassVar[str] = "Prepend"
    prepend: str = "▁"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return pl.when(col.str.len_bytes() > 0).then(pl.lit(self.prepend) + col).otherwise(col)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "prepend": self.prepend}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        return cls(cls.fields(d).str("prepend"))


@dataclass
class Sequence(Normalizer):
    hf_type: ClassVar[str] = "Sequence"
    normalizers: list[Normalizer] = field(default_factory=list)

    def expr(self, col: pl.Expr) -> pl.Expr:
        for n in self.normalizers:
            col = n.expr(col)
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "normalizers": [n.to_hf() for n in self.normalizers]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        parts = cls.fields(d).list("normalizers")
        return cls([n for n in (normalizer_from_hf(x) for x in parts) if n is not None])


def normalizer_from_hf(d: Any) -> Normalizer | None:
    """Build a normalizer from its `tokenizer.json` object (None stays None); an unsupported
    type or a mistyped field is refused."""
    if d is None:
        return None
    _, kind = component_type(d, "normalizer")
    cls = Normalizer.registry.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported normalizer in tokenizer.json: {kind!r}")
    return cls.from_hf_dict(d)


NORMALIZER_NAMES = ("none", "nfc", "nfkc", "nfd", "nfkd", "bert")


def build_normalizer(name: str | None, lowercase: bool = False) -> Normalizer | None:
    """The normalizer for a CLI name (`--normalizer`) plus the `--lowercase` flag.

    `bert` is HF's `BertNormalizer(lowercase=lowercase)` (which also strips accents when it
    lowercases, as HF's default does); the others are followed by `Lowercase` when asked."""
    parts: list[Normalizer] = []
    simple = {"nfc": NFC, "nfkc": NFKC, "nfd": NFD, "nfkd": NFKD}
    name = (name or "none").lower()
    if name in simple:
        parts.append(simple[name]())
    elif name == "bert":
        parts.append(BertNormalizer(lowercase=lowercase))
        lowercase = False
    elif name != "none":
        raise TokcolumnarValueError(f"unknown normalizer {name!r} (choose from "
                                    f"{', '.join(NORMALIZER_NAMES)})")
    if lowercase:
        parts.append(Lowercase())
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Sequence(parts)
