import pytest

from crossalign.data.readers import iter_lines, read_dictionary, read_mono, read_parallel, read_text
from crossalign.errors import CrossalignError
from crossalign.languages import check_language, to_iso639_1


def write(path, text: str | bytes):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_read_text_strips_and_skips_blank_lines(tmp_path):
    path = write(tmp_path / "a.txt", "  Hello world \n\n\tSecond line\r\n")
    assert read_text(path) == ["Hello world", "Second line"]


def test_read_text_empty_file(tmp_path):
    for name, text in (("empty.txt", ""), ("blank.txt", " \n\n\t\n")):
        path = write(tmp_path / name, text)
        with pytest.raises(CrossalignError, match=rf"{name}: file is empty"):
            read_text(path)


def test_missing_file(tmp_path):
    with pytest.raises(CrossalignError, match="nope.txt: file not found"):
        read_text(tmp_path / "nope.txt")


def test_non_utf8_names_file_and_line(tmp_path):
    path = write(tmp_path / "latin1.txt", "fine\nalso fine\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(CrossalignError, match=r"latin1.txt:3: not UTF-8.*iconv") as err:
        read_text(path)
    assert "\n" not in str(err.value)


def test_iter_lines_numbers_from_one(tmp_path):
    path = write(tmp_path / "a.txt", "x\ny\n")
    assert list(iter_lines(path)) == [(1, "x"), (2, "y")]


def test_read_mono_list_drops_exact_duplicates(tmp_path):
    a = write(tmp_path / "a.txt", "one\ntwo\n")
    b = write(tmp_path / "b.txt", "two\nthree\none\n")
    assert read_mono([a, b]) == ["one", "two", "three"]
    assert read_mono(str(a)) == ["one", "two"]


def test_read_mono_bad_mapping(tmp_path):
    with pytest.raises(CrossalignError, match="data.mono.en: a mapping needs keys dataset"):
        read_mono({"path": "x"}, where="data.mono.en")


def test_read_parallel_file_pair(tmp_path):
    src = write(tmp_path / "s.en", "Hello\n\nBye\n")
    tgt = write(tmp_path / "s.es", "Hola\nsolo\nAdiós\n")
    assert read_parallel([src, tgt]) == [("Hello", "Hola"), ("Bye", "Adiós")]


def test_read_parallel_line_count_mismatch(tmp_path):
    src = write(tmp_path / "s.en", "a\nb\nc\n")
    tgt = write(tmp_path / "s.es", "a\nb\n")
    with pytest.raises(CrossalignError, match=r"s.en \(3 lines\) and .*s.es \(2 lines\) differ"):
        read_parallel([src, tgt])


def test_read_parallel_needs_two_files(tmp_path):
    src = write(tmp_path / "s.en", "a\n")
    with pytest.raises(CrossalignError, match="must be \\[src_file, tgt_file\\]"):
        read_parallel([src])


def test_read_parallel_tsv(tmp_path):
    path = write(tmp_path / "p.tsv", "Hello\tHola\n\n house \t casa \tignored?\n")
    assert read_parallel(path) == [("Hello", "Hola"), ("house", "casa \tignored?")]


def test_read_parallel_tsv_line_without_tab(tmp_path):
    path = write(tmp_path / "p.tsv", "Hello\tHola\nno tab here\n")
    with pytest.raises(CrossalignError, match=r"p.tsv:2: no tab"):
        read_parallel(path)


def test_read_parallel_without_pairs(tmp_path):
    path = write(tmp_path / "p.tsv", "\t\nonly source\t\n")
    with pytest.raises(CrossalignError, match="has no sentence pairs"):
        read_parallel(path)


def test_read_parallel_non_utf8(tmp_path):
    src = write(tmp_path / "s.en", "ok\n")
    tgt = write(tmp_path / "s.es", b"caf\xe9\n")
    with pytest.raises(CrossalignError, match=r"s.es:1: not UTF-8"):
        read_parallel([src, tgt])


def test_read_dictionary(tmp_path):
    path = write(tmp_path / "d.txt", "house casa\n\ndog\tperro 0.9\n")
    assert read_dictionary(path) == [("house", "casa"), ("dog", "perro")]


def test_read_dictionary_line_with_one_field(tmp_path):
    path = write(tmp_path / "d.txt", "house casa\nlonely\n")
    with pytest.raises(CrossalignError, match=r"d.txt:2: dictionary line has 1 field"):
        read_dictionary(path)


def test_read_dictionary_empty(tmp_path):
    path = write(tmp_path / "d.txt", "\n\n")
    with pytest.raises(CrossalignError, match="d.txt: dictionary is empty"):
        read_dictionary(path)


def test_check_language_accepts_codes_with_region():
    assert check_language("en") == "en"
    assert check_language("zh-CN") == "zh-CN"
    assert check_language("pt_BR") == "pt_BR"


def test_check_language_suggests():
    with pytest.raises(CrossalignError, match=r"'deu' in data.mono.*did you mean 'de'"):
        check_language("deu", "data.mono")
    with pytest.raises(CrossalignError, match=r"unknown language code 'qq'.*ISO 639-1"):
        check_language("qq")


def test_to_iso639_1():
    assert to_iso639_1("deu") == "de"
    with pytest.raises(CrossalignError, match="unknown ISO 639-3 language code 'dea'"):
        to_iso639_1("dea")


def test_read_hf_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"sentence": ["a house", " ", "ein Haus"], "n": [1, 2, 3]})
    ds.save_to_disk(str(tmp_path / "ds"))
    spec = {"dataset": str(tmp_path / "ds"), "column": "sentence"}
    assert read_mono(spec) == ["a house", "ein Haus"]
    with pytest.raises(CrossalignError, match="has no column 'text'; its columns: sentence, n"):
        read_mono({"dataset": str(tmp_path / "ds")})


def test_read_hf_dataset_from_data_file(tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / "d.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    assert read_mono({"dataset": str(tmp_path / "d.jsonl")}) == ["one", "two"]
