"""values.yaml and values.schema.json: strict, documented, and in step with the settings classes."""

import re

import pytest
import yaml

import chart_support as cs

VALUES = cs.CHART / "values.yaml"


def values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def test_each_settings_block_of_the_schema_lists_exactly_its_settings_class_fields():
    schema = cs.load_values_schema()
    for name, settings_cls in cs.settings_classes().items():
        assert schema["$defs"][name] == cs.settings_schema(settings_cls), (
            f"values.schema.json $defs.{name} differs from {settings_cls.__name__}: "
            "run `make chart-regenerate` and review the diff")


def test_each_settings_block_is_checked_against_the_class_of_its_component():
    schema = cs.load_values_schema()
    assert schema["properties"]["default"]["properties"]["settings"] == {"$ref": "#/$defs/kafkaSettings"}
    assert schema["properties"]["job"]["properties"]["settings"] == {"$ref": "#/$defs/jobSettings"}
    by_command = {rule["if"]["properties"]["command"]["const"]: rule["then"]["properties"]["settings"]["$ref"]
                  for rule in schema["$defs"]["component"]["allOf"]}
    assert by_command == {"sender": "#/$defs/senderSettings", "receiver": "#/$defs/receiverSettings"}


def test_the_shared_settings_in_values_are_the_services_own_defaults():
    from marketspread.settings import KafkaSettings

    shared = values()["default"]["settings"]
    assert shared == {key: getattr(KafkaSettings(), key) for key in shared}
    assert "bootstrap_servers" not in shared  # the chart fills it in for its own Kafka


def test_the_metrics_ports_in_values_are_the_services_own_defaults():
    from marketspread.receiver.settings import ReceiverSettings
    from marketspread.sender.settings import SenderSettings
    from marketspread_job.settings import JobSettings

    v = values()
    defaults = {"sender": SenderSettings().metrics_port, "receiver": ReceiverSettings().metrics_port}
    for name, component in v["components"].items():
        assert component["settings"]["metrics_port"] == defaults[component["command"]], name
    assert v["job"]["settings"]["metrics_port"] == JobSettings().metrics_port


def test_the_state_operator_in_values_is_the_jobs_own_default():
    from marketspread_job.settings import JobSettings

    assert values()["job"]["settings"]["state_operator"] == JobSettings().state_operator


def test_the_receiver_group_in_values_is_the_receivers_own_default():
    from marketspread.receiver.settings import ReceiverSettings

    assert values()["components"]["receiver"]["settings"]["group_id"] == ReceiverSettings().group_id


def undocumented_keys(text: str) -> list[str]:
    """Keys with no `# --` comment right above them nor above any block they sit in."""
    lines = text.splitlines()
    documented_indents: list[int] = []  # indents of the documented blocks we are inside
    undocumented = []
    for number, line in enumerate(lines):
        match = re.match(r"^( *)(?:- )?([\w.-]+):", line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match.group(1))
        documented_indents = [i for i in documented_indents if i < indent]
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("#") and not lines[above].strip().startswith("# --"):
            above -= 1
        if above >= 0 and lines[above].strip().startswith("# --"):
            documented_indents.append(indent)
        elif not documented_indents:
            undocumented.append(f"line {number + 1}: {line.strip()}")
    return undocumented


def test_every_value_is_documented_where_it_lives_with_a_double_dash_comment():
    assert undocumented_keys(VALUES.read_text()) == []


def test_the_documentation_check_flags_a_key_without_a_double_dash_comment():
    text = "# -- documented\na:\n  b: 1\n# a plain comment is not documentation\nc:\n  d: 2\n"
    assert undocumented_keys(text) == ["line 5: c:", "line 6: d: 2"]


def test_every_top_level_knob_has_its_own_double_dash_comment():
    text = VALUES.read_text()
    for key in values():
        assert re.search(rf"# -- .*(?:\n#.*)*\n{re.escape(key)}:", text), key


def _objects(node, path="$"):
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield path, node
        for key, value in node.items():
            yield from _objects(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _objects(value, f"{path}[{index}]")


def test_every_object_in_the_schema_is_closed_or_says_why_it_is_open():
    # Open on purpose: Kubernetes objects (validated after rendering), free-form configuration maps,
    # maps keyed by the user's names, and the `settings` placeholder refined per command.
    open_by_design = {"$.properties.global", "$.$defs.kubernetesObject", "$.$defs.stringMap",
                      "$.properties.components", "$.properties.kafka.properties.nodePools",
                      "$.properties.kafka.properties.config", "$.properties.kafka.properties.topics.properties.config",
                      "$.properties.job.properties.sparkConf", "$.$defs.component.properties.settings",
                      "$.$defs.nodePool.properties.storage", "$.$defs.nodePool.properties.jvmOptions"}
    schema = cs.load_values_schema()
    loose = [path for path, node in _objects(schema)
             if node.get("additionalProperties") is not False and path not in open_by_design
             and "$comment" not in node and not re.search(r"\.(if|then)(\.|$)", path)]
    assert loose == []


@pytest.mark.helm
@pytest.mark.parametrize("override, message", [
    ("components.receiver.settings.group_idd=x", "additional properties 'group_idd' not allowed"),
    ("components.sender-nbbo.settings.stream=trades", "value must be one of 'nbbo', 'orders'"),
    ("job.settings.shuffle_partitions=0", "minimum"),
    ("default.settings.record_format=json", "value must be one of 'message', 'framed'"),
    ("job.settings.state_operator=rocksdb",
     "value must be one of 'apply_in_pandas_with_state', 'transform_with_state_in_pandas'"),
    ("job.executor.instances=0", "minimum"),
    ("kafka.topics.partitionz=3", "additional properties 'partitionz' not allowed"),
    ("monitoring.interval=15", "got number, want string"),
    ("job.driver.memory=2GB", "does not match pattern"),
    ("components.receiver.command=send", "value must be one of 'sender', 'receiver'"),
])
def test_the_schema_refuses_a_typo_or_an_impossible_value_before_rendering(override, message):
    assert message in cs.render_failure(sets=(override,))
