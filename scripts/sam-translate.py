#!/usr/bin/env python3
"""Print, as JSON, the CloudFormation template that AWS SAM makes of a SAM
template: what CloudFormation really gets from `sam deploy`.

It runs the SAM translator (the samtranslator package) exactly as cfn-lint
runs it before linting, through cfn-lint's own wrapper, so the checks in
internal/devstack/samtemplate see the same roles, policies and resources as
cfn-lint and CloudFormation do. Local CodeUri paths become a placeholder
S3 location, as cfn-lint does; nothing else is changed.

Usage: scripts/sam-translate.py template.yaml > translated.json

Exit status: 0 translated; 1 the template does not translate (the reasons
on stderr); 3 the SAM translator or cfn-lint is not installed (make setup
installs cfn-lint, which brings the translator).
"""

import json
import sys

try:
    from cfnlint.decode import decode
    from cfnlint.template.transforms._sam import Transform
except ImportError as err:  # reported distinctly: the caller may skip
    print(f"sam-translate: cfn-lint's SAM translator is not installed: {err}", file=sys.stderr)
    sys.exit(3)


def main(argv):
    if len(argv) != 2:
        print("usage: sam-translate.py TEMPLATE", file=sys.stderr)
        return 2
    path = argv[1]
    template, matches = decode(path)
    if matches or template is None:
        for m in matches or []:
            print(f"sam-translate: {path}: {m}", file=sys.stderr)
        return 1
    transform = Transform(path, template, "us-east-1")
    matches = transform.transform_template()
    if matches:
        for m in matches:
            print(f"sam-translate: {path}: {m.message}", file=sys.stderr)
        return 1
    json.dump(transform.template(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
