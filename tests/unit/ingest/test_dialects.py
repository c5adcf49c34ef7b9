"""The doc-site dialect rules (anaphora.ingest.dialects), each on a real snippet.

Hugo snippets are short quotes from grafana/loki docs/sources (AGPL-3.0-only), MkDocs Material ones from
traefik/traefik docs/content (MIT); GitBook and Docusaurus snippets are written in the syntax their docs describe.
"""

from __future__ import annotations

import pytest

from anaphora.ingest.dialects import fence_info, html_text, keeps_image, strip_shortcodes, unwrap

pytestmark = pytest.mark.unit


# --- Hugo (Loki) -------------------------------------------------------------------------------------------------
def test_hugo_admonition_keeps_its_text_and_drops_the_tags():
    source = """By default the `compactor.retention-enabled` flag is not set, so the logs sent to Loki live forever.

{{< admonition type="note" >}}
If you have a lifecycle policy configured on the object store,
please ensure that it is longer than the retention period.
{{< /admonition >}}
"""
    out = unwrap(source)
    assert "{{" not in out and "admonition" not in out
    assert "please ensure that it is longer than the retention period." in out and "object store," in out


def test_hugo_tab_names_become_labels():
    source = """   {{< tab-content name="wget" >}}
   ```bash
   wget https://raw.githubusercontent.com/grafana/loki/main/examples/getting-started/loki-config.yaml
   ```
   {{< /tab-content >}}"""
    out = unwrap(source)
    assert "wget:" in out.splitlines()[0]
    assert "wget https://raw.githubusercontent.com" in out and "tab-content" not in out


def test_hugo_collapse_title_is_a_label_and_figure_keeps_its_alt_text():
    assert strip_shortcodes('{{< collapse title="S3" >}}') == "S3:"
    figure = (
        '{{< figure max-width="75%" src="/media/docs/loki/get-started-flog-v3.png" '
        'caption="Getting started sample application" alt="Getting started sample application" >}}'
    )
    assert strip_shortcodes(figure) == "Getting started sample application"


def test_hugo_transclusion_is_dropped_not_resolved():
    line = '{{< docs/shared lookup="configuration.md" source="loki" version="<LOKI_VERSION>" >}}'
    assert strip_shortcodes(line) == ""


def test_hugo_mermaid_shortcode_content_is_not_text():
    source = "Before.\n\n{{< mermaid >}}\ngraph LR\n  A --> B\n{{< /mermaid >}}\n\nAfter."
    out = unwrap(source)
    assert "graph LR" not in out and "Before." in out and "After." in out


def test_shortcodes_inside_code_blocks_are_left_alone():
    source = '```yaml\nvalue: "{{< not a shortcode in code >}}"\n```'
    assert unwrap(source) == source


# --- MkDocs Material (Traefik) --------------------------------------------------------------------------------------
def test_mkdocs_collapsible_admonition_is_unindented_with_its_title():
    source = """??? note "Plugin Catalog Access"
    You can reach the [Plugin Catalog](https://plugins.traefik.io/) from the Traefik Dashboard
    using the `Plugins` menu entry.

## Add a new plugin to a Traefik instance"""
    lines = unwrap(source).splitlines()
    assert lines[0] == "Plugin Catalog Access"
    assert "You can reach the [Plugin Catalog]" in lines[2] and not lines[2].startswith(" ")
    assert "## Add a new plugin to a Traefik instance" in lines


def test_mkdocs_content_tabs_label_their_indented_fence():
    source = """=== "Ports defined on Resource"

    ```yaml tab="IngressRouteTCP"
    apiVersion: traefik.io/v1alpha1
    kind: IngressRouteTCP
    ```
"""
    out = unwrap(source)
    assert out.splitlines()[0] == "Ports defined on Resource:"
    assert '```yaml tab="IngressRouteTCP"\napiVersion: traefik.io/v1alpha1' in out  # dedented, still a fence


def test_mkdocs_fence_tab_attribute_is_the_label():
    info = fence_info('yaml tab="File (YAML)"')
    assert (info.language, info.label) == ("yaml", "File (YAML)")
    assert fence_info('{ .bash title="install.sh" }').language == "bash"
    assert fence_info("mermaid").is_diagram


def test_mkdocs_include_markdown_and_attribute_lists_are_dropped():
    assert strip_shortcodes('{% include-markdown "includes/traefik-for-business-applications.md" %}') == ""
    assert unwrap("# Migration Guide: From v1 to v2\n{: .subtitle }\nHow to migrate.") == (
        "# Migration Guide: From v1 to v2\nHow to migrate."
    )


def test_option_table_anchor_is_dropped_by_the_html_rules():
    row = '<a id="opt-acme-email" href="#opt-acme-email" title="#opt-acme-email">`acme.email`</a>'
    assert html_text(row) == "`acme.email`"


# --- GitBook ------------------------------------------------------------------------------------------------------
def test_gitbook_hint_and_tabs_unwrap_with_tab_titles_as_labels():
    source = """{% hint style="info" %}
Fluent Bit buffers records in memory.
{% endhint %}

{% tabs %}
{% tab title="fluent-bit.conf" %}
```text
[OUTPUT]
    Name es
```
{% endtab %}
{% endtabs %}
{% include "../../.gitbook/includes/advert.md" %}"""
    out = unwrap(source)
    assert "{%" not in out
    assert "Fluent Bit buffers records in memory." in out
    assert "fluent-bit.conf:" in out and "[OUTPUT]\n    Name es" in out


# --- Docusaurus ---------------------------------------------------------------------------------------------------
def test_docusaurus_admonitions_and_mdx_imports():
    source = """import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';

:::tip[Use the CLI]
Run `npx docusaurus start`.
:::

<Tabs>
  <TabItem value="npm" label="npm">
    npm install
  </TabItem>
</Tabs>"""
    out = unwrap(source)
    assert "import" not in out and ":::" not in out
    assert "Use the CLI" in out and "Run `npx docusaurus start`." in out
    assert "npm:" in html_text("<Tabs>\n  <TabItem value='npm' label='npm'>\n    npm install\n  </TabItem>\n</Tabs>")


# --- HTML -----------------------------------------------------------------------------------------------------------
def test_html_keeps_alt_text_and_drops_tracking_pixels_and_badges():
    pixel = '<img referrerpolicy="no-referrer-when-downgrade" src="https://static.scarf.sh/a.png?x-pxid=7" />'
    assert html_text(pixel) == ""
    assert html_text('<img src="one.gif" width="1" height="1" alt="">') == ""
    assert html_text('<img src="arch.png" alt="Loki architecture">') == "Loki architecture"
    assert not keeps_image("https://img.shields.io/badge/license-MIT-blue.svg")
    assert html_text("<!-- INTERACTIVE page intro.md END -->") == ""
