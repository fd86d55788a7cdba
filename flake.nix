{
  description = "ReproBridge (rb): recover, pin and audit the reproduction of ML research repositories";

  # rb itself only needs a recent Python and its pure-Python dependencies.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/b6018f87da91d19d0ab4cf979885689b469cdd41?narHash=sha256-twXPFqFsrrY5r28Zh7Homgcp2gUMBgQ6WDS98Q/3xFI=";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = nixpkgs.lib.genAttrs systems;
      rbFor =
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          py = pkgs.python312Packages;
          pyproject = builtins.fromTOML (builtins.readFile ./pyproject.toml);
          version = builtins.head (
            builtins.match ".*__version__ = \"([^\"]+)\".*" (builtins.readFile ./reprobridge/__init__.py)
          );
        in
        py.buildPythonApplication {
          pname = pyproject.project.name;
          inherit version;
          pyproject = true;
          src = ./.;
          build-system = [ py.hatchling ];
          dependencies = [
            py.click
            py.pydantic
            py.tomlkit
            py.anthropic
            py.psutil
            py.nvidia-ml-py
            py.packaging
            py.pyyaml
            py.pypdf
            py.cryptography
            py.filelock
            py.typing-extensions
            # rb finds the uv binary through the uv package (python3Packages.uv wraps pkgs.uv).
            py.uv
          ];
          # rb calls these at run time; put them on its PATH.
          makeWrapperArgs = [
            "--prefix PATH : ${
              pkgs.lib.makeBinPath [
                pkgs.git
                pkgs.uv
                pkgs.bubblewrap
              ]
            }"
          ];
          nativeCheckInputs = [
            py.pytestCheckHook
            py.hypothesis
            pkgs.git
          ];
          # The nix-marked tests need a nix store inside the build sandbox; they run in CI instead.
          pytestFlagsArray = [
            "-m"
            "'not nix'"
          ];
          pythonImportsCheck = [ "reprobridge" ];
          meta.mainProgram = "rb";
        };
    in
    {
      packages = forAllSystems (system: {
        rb = rbFor system;
        default = rbFor system;
      });
      apps = forAllSystems (system: {
        default = {
          type = "app";
          program = "${rbFor system}/bin/rb";
        };
      });
      devShells = forAllSystems (
        system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
        in
        {
          default = pkgs.mkShell {
            inputsFrom = [ (rbFor system) ];
            packages = [
              pkgs.ruff
              pkgs.mypy
              pkgs.uv
              pkgs.shellcheck
              pkgs.bubblewrap
            ];
          };
        }
      );
      # `nix flake init -t github:reprobridge/reprobridge` writes the same flake.nix that
      # `rb init` writes (plus a starter manifest); rb renders only the nixpkgs pin into it.
      templates.default = {
        path = ./reprobridge/templates;
        description = "A ReproBridge flake that reads reprobridge.toml (run `rb init` to fill the manifest)";
        welcomeText = ''
          Wrote flake.nix (it reads reprobridge.toml) and a starter reprobridge.toml.
          Run `rb init` to recover the real environment and experiments, then
          `git add flake.nix reprobridge.toml` and `nix run .#reproduce-<experiment>`.
        '';
      };
    };
}
