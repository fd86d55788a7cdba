# The package set: `import nixpkgs { system, config }` in the generated flake lands here.
#
# Derivations are built by a static bash (bin/bash) with a static busybox (bin/busybox) for
# file operations; both are copied into the prepared copy of this directory, together with
# host.json, which names the host tools that stand in for packages (python, uv, coreutils).
# Linking host tools is impure on purpose: this is a test double.
{
  system ? builtins.currentSystem,
  config ? { },
  overlays ? [ ],
  ...
}:
let
  lib = import ./nixpkgs-lib/lib;
  host = builtins.fromJSON (builtins.readFile ./host.json);
  # One store path for both, so busybox keeps its own name (it picks the applet from
  # argv[0] unless that is "busybox").
  tools = ./bin;
  bash = "${tools}/bash";
  busybox = "${tools}/busybox";

  run =
    name: script: attrs:
    derivation (
      {
        inherit name system;
        builder = bash;
        args = [
          "-c"
          script
        ];
      }
      // attrs
    );

  # A package whose bin/ holds symlinks to host programs: { name = "/abs/path"; }.
  linkBins =
    name: links:
    run name ''
      ${busybox} mkdir -p $out/bin
      ${lib.concatStringsSep "\n" (
        lib.mapAttrsToList (n: target: "${busybox} ln -s ${target} $out/bin/${n}") links
      )}
    '' { };

  # A package that only has to exist (CUDA, compilers, libraries).
  dummy =
    name:
    run name ''
      ${busybox} mkdir -p $out/bin $out/lib
      echo ${name} > $out/stub
    '' { };

  writeText =
    name: text:
    run name ''${busybox} cat "$textPath" > "$out"'' {
      inherit text;
      passAsFile = [ "text" ];
    };

  mkPython =
    version: path:
    let
      digits = builtins.replaceStrings [ "." ] [ "" ] version;
      packages = {
        numpy = dummy "python${digits}-numpy";
        pyyaml = dummy "python${digits}-pyyaml";
        typing-extensions = dummy "python${digits}-typing-extensions";
        typing_extensions = dummy "python${digits}-typing_extensions";
      };
      base =
        linkBins "python${digits}" {
          python = path;
          python3 = path;
          "python${version}" = path;
        }
        // {
          pythonVersion = version;
          pkgs = packages;
          # Forcing `pkgs` makes an unknown package name fail here, as in nixpkgs.
          withPackages =
            f:
            run "python${digits}-env" "${busybox} ln -s ${base} $out" {
              pkgs = f packages;
            };
        };
    in
    {
      "python${digits}" = base;
      "python${digits}Packages" = packages;
    };

  pythons = builtins.foldl' (acc: v: acc // mkPython v host.pythons.${v}) { } (
    builtins.attrNames host.pythons
  );

  gcc = v: dummy "gcc-${v}";
in
pythons
// {
  inherit lib writeText;
  # For tests that look at what the flake passed to `import nixpkgs`.
  stubConfig = config;

  writeShellScript =
    name: text:
    run name ''
      { echo "#!${bash}"; ${busybox} cat "$textPath"; } > "$out"
      ${busybox} chmod +x "$out"
    '' {
      inherit text;
      passAsFile = [ "text" ];
    };

  # nix develop runs the builder (bash) with its get-env script, which dumps the variables
  # below; PATH stands in for what stdenv's setup would add from `packages`.
  mkShell =
    {
      name ? "nix-shell",
      packages ? [ ],
      ...
    }@args:
    derivation (
      builtins.removeAttrs args [ "packages" ]
      // {
        inherit name system;
        builder = bash;
        args = [
          "-c"
          "echo mkShell > $out"
        ];
        outputs = [ "out" ];
        PATH = lib.makeBinPath packages;
      }
    );

  coreutils = linkBins "coreutils" host.coreutils;
  bashInteractive = linkBins "bash-interactive" {
    bash = bash;
    sh = bash;
  };
  uv = if host.uv != null then linkBins "uv" { uv = host.uv; } else throw "nixstub: no uv on this host";
  zlib = dummy "zlib";
  stdenv.cc.cc.lib = dummy "gcc-cc-lib";
  pythonManylinuxPackages.manylinux2014 = [ (dummy "manylinux2014-libs") ];

  gcc11 = gcc "11";
  gcc12 = gcc "12";
  gcc13 = gcc "13";
  libsndfile = dummy "libsndfile";
  ffmpeg = dummy "ffmpeg";

  cudaPackages_12_1 = {
    cudatoolkit = dummy "cudatoolkit-12.1";
    cuda_nvcc = dummy "cuda_nvcc-12.1";
    backendStdenv.cc = dummy "gcc-wrapper-12-for-cuda-12.1";
  };
  cudaPackages_11_8 = {
    cudatoolkit = dummy "cudatoolkit-11.8";
    cuda_nvcc = dummy "cuda_nvcc-11.8";
    backendStdenv.cc = dummy "gcc-wrapper-11-for-cuda-11.8";
  };
}
