"""A lexicon mined from a KB's own multilingual names: aligned words become senses, chance does
not, function words link by association and never by spelling, Chinese and Japanese words are
found without spaces, and a user's lexicon keeps the lead."""

from babelink.kb.base import KnowledgeBaseBuilder
from babelink.translate import Renderer, english_words
from babelink.translate.lexicon import Lexicon
from babelink.translate.mining import MINED, MiningParams, lexicon_with_mined, mine_lexicon

CONCEPTS = [
    # (English name, Spanish name, Chinese name)
    ("Essential hypertension", "Hipertensión esencial", "原发性高血压"),
    ("Secondary hypertension", "Hipertensión secundaria", "继发性高血压"),
    ("Portal hypertension", "Hipertensión portal", "门静脉高压"),
    ("Arterial embolism", "Embolia arterial", "动脉栓塞"),
    ("Arterial thrombosis", "Trombosis arterial", "动脉血栓"),
    ("Secondary glaucoma", "Glaucoma secundario", "继发性青光眼"),
    ("Diabetes of the kidney", "Diabetes del riñón", "肾性糖尿病"),
]


def kb():
    builder = KnowledgeBaseBuilder()
    for number, (english, spanish, chinese) in enumerate(CONCEPTS):
        builder.add_name(f"C{number}", english, lang="en", preferred=True)
        builder.add_name(f"C{number}", spanish, lang="es")
        builder.add_name(f"C{number}", chinese, lang="zh")
    builder.add_name("C9", "Hypertension", lang="en", preferred=True)
    return builder.build()


def test_aligned_words_become_senses_best_first():
    lexicon = mine_lexicon(kb())
    spanish = lexicon.entries("es")
    assert spanish["hipertensión"][0] == "hypertension"
    assert spanish["arterial"][0] == "arterial"
    assert "esencial" not in spanish and "del" not in spanish  # one shared concept is chance, not evidence
    assert ("es", MINED) in [(source.lang, source.file) for source in lexicon.sources]


def test_a_stricter_association_keeps_fewer_senses():
    loose = mine_lexicon(kb(), MiningParams(min_dice=0.1, min_concepts=1)).entries("es")
    strict = mine_lexicon(kb(), MiningParams(min_dice=0.9, min_concepts=1)).entries("es")
    assert loose["hipertensión"] == strict["hipertensión"] == ("hypertension",)  # linked one to one
    assert loose["secundaria"] == ("secondary",) and "secundaria" not in strict and set(strict) <= set(loose)


def test_words_are_linked_one_to_one_within_a_concept():
    # "portal" shares two concepts with "hypertension" too, but "hipertensión" takes it first
    builder = KnowledgeBaseBuilder()
    for number, (english, spanish) in enumerate([("Portal hypertension", "Hipertensión portal"),
                                                 ("Portal hypertension", "Hipertensión portal"),
                                                 ("Essential hypertension", "Hipertensión esencial"),
                                                 ("Portal vein", "Vena portal")]):
        builder.add_name(f"C{number}", english, lang="en")
        builder.add_name(f"C{number}", spanish, lang="es")
    spanish = mine_lexicon(builder.build(), MiningParams(min_dice=0.1)).entries("es")
    assert spanish["hipertensión"] == ("hypertension",) and spanish["portal"] == ("portal",)



def test_a_word_spelled_alike_outranks_a_stronger_association():
    # "systemic" is in six concepts' English names, "systémique" in two French ones: by Dice alone
    # "widespread", in exactly those two, would be its sense
    pairs = [("Systemic widespread sclerosis", "Sclérose systémique"),
             ("Systemic widespread vasculitis", "Vascularite systémique"),
             *((f"Systemic {english}", f"{french} généralisée")
               for english, french in [("infection", "infection"), ("edema", "œdème"), ("rash", "éruption"),
                                       ("pain", "douleur")])]
    builder = KnowledgeBaseBuilder()
    for number, (english, french) in enumerate(pairs):
        builder.add_name(f"C{number}", english, lang="en")
        builder.add_name(f"C{number}", french, lang="fr")
    knowledge_base = builder.build()
    assert mine_lexicon(knowledge_base).entries("fr")["systémique"][0] == "systemic"
    strict = mine_lexicon(knowledge_base, MiningParams(min_dice=0.9)).entries("fr")
    assert strict["systémique"] == ("systemic",)  # a cognate is kept below the association asked for
    french = mine_lexicon(knowledge_base).entries("fr")
    assert french["infection"] == ("infection",)  # the same word: one concept is evidence enough
    assert "vascularite" not in french  # a cognate, but in one concept only


def test_a_cognate_met_once_leads_the_senses_of_a_word_kept_for_others():
    # "artérielle" names blood pressure in two French titles (*tension artérielle*), "arterial" in one
    pairs = [("Arterial hypertension", "Hypertension artérielle"), ("Pressure", "Artérielle"),
             ("Pressure", "Artérielle")]
    builder = KnowledgeBaseBuilder()
    for number, (english, french) in enumerate(pairs):
        builder.add_name(f"C{number}", english, lang="en")
        builder.add_name(f"C{number}", french, lang="fr")
    assert mine_lexicon(builder.build()).entries("fr")["artérielle"] == ("arterial", "pressure")


def test_function_words_link_by_association_and_never_by_spelling():
    # "low" and "right" are English stop words, "droite" a French one; "de" is spelled like the
    # "de" of an eponym, which it meets once, and meets "of" twice
    pairs = [("Cancer of breast", "Cancer de sein"), ("Cancer of lung", "Cancer de poumon"),
             ("Cornelia de Lange syndrome", "Syndrome de Cornelia de Lange"),
             ("Low blood pressure", "Tension basse"), ("Low platelets", "Plaquettes basses"),
             ("Low vision", "Vision basse"), ("Right heart failure", "Insuffisance cardiaque droite"),
             ("Right bundle branch block", "Bloc de branche droite")]
    builder = KnowledgeBaseBuilder()
    for number, (english, french) in enumerate(pairs):
        builder.add_name(f"C{number}", english, lang="en")
        builder.add_name(f"C{number}", french, lang="fr")
    french = mine_lexicon(builder.build()).entries("fr")
    assert french["de"] == ("of",)
    assert french["basse"] == ("low",) and french["droite"] == ("right",)


CHINESE = [
    ("Type 1 diabetes mellitus", "1型糖尿病"),
    ("Type 2 diabetes mellitus", "2型糖尿病"),
    ("Diabetes mellitus in pregnancy", "妊娠糖尿病"),
    ("Diabetes mellitus", "糖尿病"),
    ("Glycosuria", "糖尿"),
    ("Essential hypertension", "原发性高血压"),
    ("Secondary hypertension", "继发性高血压"),
    ("Hypertension", "高血压"),
    ("Hypertension in pregnancy", "妊娠高血压"),
    ("Pregnancy", "妊娠"),
]


def chinese_kb():
    builder = KnowledgeBaseBuilder()
    for number, (english, chinese) in enumerate(CHINESE):
        builder.add_name(f"C{number}", english, lang="en", preferred=True)
        builder.add_name(f"C{number}", chinese, lang="zh")
    return builder.build()


def test_chinese_words_are_found_without_spaces():
    knowledge_base = chinese_kb()
    chinese = mine_lexicon(knowledge_base).entries("zh")
    assert chinese["糖尿病"] == ("diabetes mellitus",)  # it meets "mellitus" only in that phrase
    assert chinese["高血压"] == ("hypertension",) and chinese["妊娠"] == ("pregnancy",)
    # a character belongs to one linked word: once "糖尿病" has its sense, its parts take none of it
    assert not any(set(senses) & {"diabetes", "mellitus", "diabetes mellitus"}
                   for word, senses in chinese.items() if word != "糖尿病" and word in "糖尿病")
    renderer = Renderer(mine_lexicon(knowledge_base), english_words(knowledge_base))
    [rendered, *_] = renderer.render("患者有糖尿病和高血压", "zh")
    assert "diabetes mellitus" in rendered and "hypertension" in rendered


def test_katakana_runs_are_one_word_and_thai_is_not_mined():
    builder = KnowledgeBaseBuilder()
    for number, (english, japanese, thai) in enumerate([("Insulin resistance", "インスリン抵抗性", "ดื้ออินซูลิน"),
                                                       ("Insulin deficiency", "インスリン欠乏", "ขาดอินซูลิน"),
                                                       ("Insulin allergy", "インスリンアレルギー", "แพ้อินซูลิน")]):
        builder.add_name(f"C{number}", english, lang="en")
        builder.add_name(f"C{number}", japanese, lang="ja")
        builder.add_name(f"C{number}", thai, lang="th")
    lexicon = mine_lexicon(builder.build(), MiningParams(min_dice=0.1))
    assert lexicon.entries("ja")["インスリン"] == ("insulin",) and "インス" not in lexicon.entries("ja")
    assert "th" not in lexicon.languages


def test_mined_senses_render_a_mention_the_kb_names_only_in_english():
    knowledge_base = kb()
    renderer = Renderer(mine_lexicon(knowledge_base), english_words(knowledge_base))
    assert "arterial hypertension" in renderer.render("hipertensión arterial", "es")


def test_a_users_lexicon_leads_and_the_mined_senses_follow():
    user = Lexicon({"es": {"hipertensión": ("high blood pressure",)}})
    merged = lexicon_with_mined(user, kb())
    assert merged.entries("es")["hipertensión"][:2] == ("high blood pressure", "hypertension")
    assert merged.entries("es")["arterial"][0] == "arterial"


def test_cli_build_translations_from_kb(tmp_path):
    import json

    from support import babelink

    rows = [f"C{n}\t{name}\t{lang}\n" for n, (english, spanish, _) in enumerate(CONCEPTS)
            for name, lang in ((english, "en"), (spanish, "es"))]
    rows.append("C9\tHypertension\ten\n")
    kb_file = tmp_path / "kb.tsv"
    kb_file.write_text("id\tname\tlang\n" + "".join(rows), encoding="utf-8")
    out = tmp_path / "bundle"
    built = babelink("build", "--kb", kb_file, "--out", out, "--retriever", "sparse", "--translations-from-kb")
    assert built.returncode == 0, built.stderr
    assert "lexicons for es" in built.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert [source["file"] for source in manifest["translations"]["sources"]] == [MINED]
    result = babelink("normalize", "--bundle", out, "--lang", "es", "--top-k", "1", "hipertensión")
    assert json.loads(result.stdout)["candidates"][0]["translated"] == "hypertension"


def test_cli_mining_a_kb_with_nothing_to_mine_is_one_clear_line(tmp_path):
    from support import babelink

    kb_file = tmp_path / "kb.tsv"
    kb_file.write_text("id\tname\nC1\tAsthma\nC2\tFever\n", encoding="utf-8")
    result = babelink("build", "--kb", kb_file, "--out", tmp_path / "b", "--retriever", "sparse",
                      "--translations-from-kb")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "nothing to mine a lexicon from" in result.stderr and not (tmp_path / "b").exists()
